"""Inferred dependency graph vs no graph vs the dataset's own graph, on every benchmark folder.

One embedding pass and one first pass per dataset: the graphs only change the dependency walk, so
the hybrid hits of every query are computed once and each graph is walked over the same hits (the
same ``expand_with_dependencies`` and ``RetrievalSettings`` defaults as ``toolweave bench``; the
figures match ``toolweave bench NAME --graph ...``). Vectors are cached by text hash in
``--cache`` (default ``/tmp/toolweave-bench-cache``) so re-runs cost no embedding.

    python bench/inference.py api_bank metatool seal_tools toollinkos [--split examples]
        [--limit-single 2000] [--save-edges DIR] [--before DIR]

``--save-edges DIR`` writes the inferred edges of each dataset (to compare a later version with this
one: ``--before DIR`` reads them back as the "inferred (before)" column).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from toolweave.benchmark import load_dataset
from toolweave.benchmark.datasets import BenchDataset, BenchQuery, resolve_dataset
from toolweave.records import DependencyEdge, EdgeKind
from toolweave.registry.catalog import load_catalog
from toolweave.registry.embeddings import Embedder
from toolweave.registry.graph import DependencyGraph
from toolweave.registry.inference import infer_edges, propose_edges, rule_of, walkable
from toolweave.registry.inference.calibration import RULE_CONFIDENCE, smoothed_precision
from toolweave.registry.registry import Registry
from toolweave.retrieval import retrieve_tools
from toolweave.retrieval.metrics import summarize
from toolweave.retrieval.results import Hit
from toolweave.retrieval.walk import expand_with_dependencies
from toolweave.settings import RetrievalSettings, Settings

GOLD_GRAPHS = ("toollinkos", "api_bank", "openapi_links")
"""The folders with a gold dependency graph: the calibration data (``--calibrate``)."""

Lookup = Callable[[str, Sequence[EdgeKind] | None], Sequence[DependencyEdge]]


class CachedEmbedder(Embedder):
    """The default embedder with a per-text vector cache on disk (bench runs only)."""

    def __init__(self, cache_dir: Path) -> None:
        super().__init__()
        cache_dir.mkdir(parents=True, exist_ok=True)
        self._file = cache_dir / f"{hashlib.sha256(self.model_name.encode()).hexdigest()[:12]}.npz"
        self._vectors: dict[str, np.ndarray] = {}
        if self._file.exists():
            with np.load(self._file) as data:
                self._vectors = {k: data[k] for k in data.files}
        self._dirty = False

    def embed_documents(self, texts: Sequence[str], batch_size: int = 16) -> np.ndarray:
        keys = [hashlib.sha256(t.encode()).hexdigest() for t in texts]
        missing = sorted({i for i, k in enumerate(keys) if k not in self._vectors}, key=lambda i: keys[i])
        if missing:
            fresh = super().embed_documents([texts[i] for i in missing], batch_size)
            for i, vec in zip(missing, fresh, strict=True):
                self._vectors[keys[i]] = vec
            self._dirty = True
        return np.stack([self._vectors[k] for k in keys]) if keys else super().embed_documents([])

    def save(self) -> None:
        if self._dirty:
            np.savez(self._file, **self._vectors)
            self._dirty = False


def rule_counts(name: str) -> dict[str, tuple[int, int]]:
    """Per rule: (proposed pairs that are gold edges, proposed pairs) on one gold graph; rules only."""
    path = resolve_dataset(name)
    catalog = load_catalog([path], path.name, require_description=False)
    gold = {(e.tool, e.depends_on) for e in catalog.edges}
    by_rule: dict[str, set[tuple[str, str]]] = {r: set() for r in RULE_CONFIDENCE}
    for e in propose_edges(catalog.tools):
        by_rule.setdefault(rule_of(e), set()).add((e.tool, e.depends_on))
    return {r: (len(pairs & gold), len(pairs)) for r, pairs in by_rule.items()}


def calibrate(counts: dict[str, dict[str, tuple[int, int]]], leave_out: str = "") -> dict[str, float]:
    """Each rule's smoothed precision pooled over the gold graphs, without ``leave_out``'s."""
    rules = sorted({r for per in counts.values() for r in per})
    table = {}
    for r in rules:
        matched = sum(per.get(r, (0, 0))[0] for d, per in counts.items() if d != leave_out)
        predicted = sum(per.get(r, (0, 0))[1] for d, per in counts.items() if d != leave_out)
        table[r] = smoothed_precision(matched, predicted)
    return table


def robust_calibration(counts: dict[str, dict[str, tuple[int, int]]]) -> dict[str, float]:
    """The shipped confidences: each rule's worst leave-one-dataset-out value, so a rule trusted on one
    gold graph only (the one it was designed on) is not trusted at all."""
    lodo = [calibrate(counts, d) for d in counts]
    return {r: min(t[r] for t in lodo) for r in lodo[0]}


def print_calibration(counts: dict[str, dict[str, tuple[int, int]]]) -> None:
    names = list(counts)
    head = " | ".join(f"{d} matched/predicted" for d in names)
    print(f"| rule | {head} | pooled | " + " | ".join(f"without {d}" for d in names) + " | shipped (min) |")
    print("|---" * (3 + 2 * len(names)) + "|")
    lodo = {d: calibrate(counts, d) for d in names}
    pooled = calibrate(counts)
    shipped = robust_calibration(counts)
    for r in pooled:
        cells = [f"{counts[d].get(r, (0, 0))[0]}/{counts[d].get(r, (0, 0))[1]}" for d in names]
        lodo_cells = " | ".join(str(lodo[d][r]) for d in names)
        print(f"| {r} | " + " | ".join(cells) + f" | {pooled[r]} | {lodo_cells} | **{shipped[r]}** |")
    print(json.dumps(shipped, indent=1))


def _graph_lookup(dataset: BenchDataset, edges: Sequence[DependencyEdge]) -> Lookup:
    graph = DependencyGraph()
    for t in dataset.tools:
        graph.add_tool(t.id, t.kind, t.source)
    graph.add_edges(edges)
    return graph.dependencies


def _edges_to_json(edges: Sequence[DependencyEdge]) -> list[dict[str, object]]:
    return [e.model_dump(mode="json") for e in edges]


def run(args: argparse.Namespace) -> list[dict[str, object]]:
    counts = {d: rule_counts(d) for d in GOLD_GRAPHS} if args.lodo else {}
    embedder = CachedEmbedder(Path(args.cache))
    params = RetrievalSettings()
    rows: list[dict[str, object]] = []
    for name in args.datasets:
        dataset = load_dataset(name)
        with tempfile.TemporaryDirectory(prefix="toolweave-inference-bench-") as tmp:
            registry = Registry.open(
                Path(tmp) / "r", embedder=embedder, settings=Settings(infer_dependencies=False)
            )
            registry.ingest(dataset.name, dataset.tools, [])
            embedder.save()
            vectors = registry.vectors()
            records = list(registry.tools())
            started = time.perf_counter()
            # leave-one-dataset-out: a gold graph is judged on confidences calibrated without it
            table = calibrate(counts, dataset.name) if dataset.name in counts else None
            inferred = infer_edges(records, vectors=vectors, confidence=table)
            infer_s = time.perf_counter() - started
            graphs: dict[str, list[DependencyEdge]] = {
                "none": [],
                "inferred": walkable(inferred, args.min_confidence),
                "declared": dataset.edges,
            }
            if args.save_edges:
                out = Path(args.save_edges)
                out.mkdir(parents=True, exist_ok=True)
                (out / f"{dataset.name}.json").write_text(json.dumps(_edges_to_json(inferred)))
            if args.before:
                before = json.loads((Path(args.before) / f"{dataset.name}.json").read_text())
                graphs["inferred_before"] = [DependencyEdge.model_validate(e) for e in before]
            lookups = {g: _graph_lookup(dataset, edges) for g, edges in graphs.items()}
            names = {t.id: t.name for t in records}
            first = params.model_copy(
                update={"method": "hybrid", "final_k": max(params.final_k, params.top_k)}
            )
            for set_name, queries in dataset.query_sets.items():
                # only ToolLinkOS has a split.json: other datasets are scored whole
                split = args.split if dataset.name == "toollinkos" else "all"
                chosen = [q for q in queries if split == "all" or q.split == split]
                if set_name == "queries_single" and args.limit_single:
                    chosen = random.Random(0).sample(chosen, min(args.limit_single, len(chosen)))
                hits = _first_pass(registry, chosen, first)
                for gname, lookup in lookups.items():
                    runs = []
                    for q, h in zip(chosen, hits, strict=True):
                        ranked = expand_with_dependencies(
                            h,
                            lookup,
                            top_k=params.top_k,
                            final_k=params.final_k,
                            d_limit=params.d_limit,
                            edge_kinds=params.edge_kinds,
                        )
                        runs.append(([names[r.tool_id] for r in ranked], q.gold))
                    m = summarize(runs, (10,))
                    row = {
                        "dataset": dataset.name,
                        "queries_file": set_name,
                        "split": split,
                        "queries": len(chosen),
                        "graph": gname + ("_lodo" if gname == "inferred" and table is not None else ""),
                        "edges": len(graphs[gname]),
                        **{k: round(v, 4) for k, v in m.items()},
                    }
                    if gname == "inferred":
                        row["edges_stored"] = len(inferred)
                        row["infer_s"] = round(infer_s, 2)
                    rows.append(row)
                    print(json.dumps(row), flush=True)
        embedder.save()
    return rows


def _first_pass(
    registry: Registry, queries: Sequence[BenchQuery], params: RetrievalSettings
) -> list[list[Hit]]:
    return [[Hit(r.tool_id, r.score) for r in retrieve_tools(registry, q.text, params)] for q in queries]


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("datasets", nargs="+")
    ap.add_argument("--split", default="all", help="all, examples or test (ToolLinkOS split.json)")
    ap.add_argument("--limit-single", type=int, default=0, help="sample of MetaTool single (0 = all)")
    ap.add_argument("--min-confidence", type=float, default=Settings().infer_min_confidence)
    ap.add_argument("--save-edges", default="")
    ap.add_argument("--before", default="")
    ap.add_argument("--cache", default="/tmp/toolweave-bench-cache")
    ap.add_argument(
        "--lodo", action="store_true", help="gold-graph datasets: leave-one-dataset-out confidences"
    )
    ap.add_argument("--calibrate", action="store_true", help="print the per-rule calibration table and stop")
    args = ap.parse_args(argv)
    if args.calibrate:
        print_calibration({d: rule_counts(d) for d in args.datasets})
        return
    run(args)


if __name__ == "__main__":
    sys.exit(main())
