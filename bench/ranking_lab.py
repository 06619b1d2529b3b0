"""Ranking experiments (fusion, walk order, relevance floor) on recorded first passes.

    .venv/bin/python bench/ranking_lab.py record toollinkos api_bank metatool seal_tools
    .venv/bin/python bench/ranking_lab.py run                # every experiment, JSON lines + tables

``record`` builds each dataset's registry once (embeddings from the disk cache), records every query's
vector and full-text candidates and both dependency graphs (declared; inferred at ingest by the
product's own rules) into bench/out/lab/NAME.pkl. ``run`` replays them through the real pipeline
(``toolweave.retrieval.retrieve``) under each setting: seconds per variant instead of minutes.
Design splits: ToolLinkOS ``examples`` and Seal-Tools ``dev``; everything else is out-of-sample.
"""

from __future__ import annotations

import argparse
import json
import pickle
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from toolweave.benchmark import load_dataset
from toolweave.benchmark.embedding_cache import CachedEmbedder
from toolweave.benchmark.recorded import RecordedGraph, RecordedIndex
from toolweave.records import DependencyEdge
from toolweave.registry import Embedder, Registry
from toolweave.retrieval import retrieve
from toolweave.retrieval.metrics import summarize
from toolweave.retrieval.query import clean_query
from toolweave.retrieval.results import Hit
from toolweave.settings import RetrievalSettings, Settings

OUT = Path(__file__).parent / "out" / "lab"
DESIGN = {"toollinkos": "examples", "seal_tools": "dev"}
"""The only splits a choice may be made on."""


@dataclass
class Recording:
    name: str
    queries: dict[str, list[tuple[str, tuple[str, ...], str | None]]]
    """Query set → (text, gold names, split)."""
    hits: dict[tuple[str, ...], tuple[list[Hit], list[Hit]]]
    names: dict[str, str]
    records: dict[str, object]
    graphs: dict[str, dict[str, list[DependencyEdge]]]
    """``declared`` / ``inferred`` → tool id → edges."""


SAMPLE_ABOVE = 5000
"""Query sets larger than this are sampled (every ``--every``-th query): MetaTool single has 20,563."""


def record(name: str, embedder: Embedder, every: int = 1) -> Recording:
    data = load_dataset(name)
    for set_name, qs in data.query_sets.items():
        if len(qs) > SAMPLE_ABOVE and every > 1:
            data.query_sets[set_name] = qs[::every]
    graphs: dict[str, dict[str, list[DependencyEdge]]] = {}
    hits: dict[tuple[str, ...], tuple[list[Hit], list[Hit]]] = {}
    with tempfile.TemporaryDirectory(prefix="toolweave-lab-") as tmp:
        for graph in ("declared", "inferred"):
            settings = Settings(infer_dependencies=graph == "inferred")
            reg = Registry.open(Path(tmp) / graph, embedder=embedder, settings=settings)
            t0 = time.perf_counter()
            reg.ingest(data.name, data.tools, data.edges if graph == "declared" else [])
            print(f"{name}: {graph} registry in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
            graphs[graph] = {t.id: reg.dependencies(t.id) for t in reg.tools()}
            if graph == "declared":
                names = {t.id: t.name for t in reg.tools()}
                records = {t.id: t for t in reg.tools()}
                index = RecordedIndex(live=reg)
                texts = list(
                    dict.fromkeys((clean_query(q.text),) for qs in data.query_sets.values() for q in qs)
                )
                t0 = time.perf_counter()
                for start in range(0, len(texts), 256):
                    index.record(texts[start : start + 256])
                print(f"{name}: {len(texts)} queries in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
                hits = index.hits
            reg.close()
    queries = {
        set_name: [(clean_query(q.text), q.gold, q.split) for q in qs]
        for set_name, qs in data.query_sets.items()
    }
    return Recording(name, queries, hits, names, records, graphs)


def load(name: str) -> Recording:
    with (OUT / f"{name}.pkl").open("rb") as f:
        return pickle.load(f)


def evaluate(
    rec: Recording, params: RetrievalSettings, graph: str, *, split: str | None = None, ks=(5, 10)
) -> dict[str, dict[str, float]]:
    """Metrics per query set (``split`` None = all queries) of ``params`` on the recording."""
    index = RecordedIndex(records=rec.records, hits=rec.hits)
    deps = RecordedGraph(rec.graphs.get(graph, {}))
    out = {}
    for set_name, queries in rec.queries.items():
        chosen = [q for q in queries if split is None or q[2] == split]
        if not chosen:
            continue
        runs, published = [], []
        for text, gold, _split in chosen:
            ranked = retrieve(text, index, deps, params)
            runs.append(([rec.names[r.tool_id] for r in ranked], gold))
            published.append([rec.names[r.tool_id] for r in ranked if r.publish])
        out[set_name] = summarize(runs, ks, published)
    return out


EXPERIMENTS: dict[str, list[tuple[str, dict[str, object]]]] = {
    # (graph, settings) per variant; method first
    "fusion": [
        (g, {"method": m, "fusion": f})
        for f in ("convex", "rrf", "zscore")
        for m, g in (("hybrid", "none"), ("grtf", "declared"), ("grtf", "inferred"))
    ]
    + [("none", {"method": "bm25"}), ("none", {"method": "vector"})],
    "order": [
        (g, {"method": "grtf", "walk_order": o})
        for o in ("dfs", "weighted")
        for g in ("declared", "inferred")
    ],
    "floor": [
        (g, {"method": m, "floor_relative": r, "floor_absolute": a})
        for r in (0.0, 0.3, 0.4, 0.5, 0.6, 0.7)
        for a in (0.0, 0.2, 0.3)
        for m, g in (("hybrid", "none"), ("grtf", "declared"))
    ],
}


def run(names: list[str], experiment: str, base: dict[str, object]) -> None:
    for name in names:
        rec = load(name)
        splits = [None, DESIGN[name]] if name in DESIGN else [None]
        if name == "toollinkos":
            splits.append("test")
        if name == "seal_tools":
            splits.append("test_in_domain")
        for graph, params in EXPERIMENTS[experiment]:
            settings = RetrievalSettings.model_validate({**base, **params})
            for split in splits:
                for set_name, m in evaluate(rec, settings, graph, split=split).items():
                    row = {
                        "dataset": name,
                        "set": set_name,
                        "split": split or "all",
                        "in_sample": split is not None and split == DESIGN.get(name),
                        "graph": graph,
                        **{k: v for k, v in params.items()},
                        **{k: round(v, 4) for k, v in m.items() if k.endswith(("@5", "@10")) or "@" not in k},
                    }
                    print(json.dumps(row), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("command", choices=["record", "run"])
    parser.add_argument("datasets", nargs="*", default=["toollinkos", "api_bank", "metatool", "seal_tools"])
    parser.add_argument("--exp", default="fusion", choices=sorted(EXPERIMENTS))
    parser.add_argument("--base", default="{}", help="JSON settings under every variant")
    parser.add_argument("--every", type=int, default=1, help="sample large query sets (see SAMPLE_ABOVE)")
    args = parser.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    if args.command == "run":
        run(args.datasets, args.exp, json.loads(args.base))
        return
    embedder = CachedEmbedder(Embedder())
    for name in args.datasets:
        rec = record(name, embedder, args.every)
        with (OUT / f"{name}.pkl").open("wb") as f:
            pickle.dump(rec, f)
        print(json.dumps({"recorded": name, "cache_hits": embedder.hits, "misses": embedder.misses}))


if __name__ == "__main__":
    main()
