"""Graph-smoothed tool vectors (Tool Graph Retriever), measured leave-one-dataset-out.

    nice -n 19 .venv/bin/python bench/smoothing_lab.py grid toollinkos api_bank seal_tools openapi_links
    nice -n 19 .venv/bin/python bench/smoothing_lab.py grid metatool      # no edges: the baseline only
    .venv/bin/python bench/smoothing_lab.py lodo --rows bench/out/lab/smoothing-*.json

TGR's idea: propagate tool embeddings over the dependency graph, GCN-style, so that a prerequisite
(a login, a location reader) borrows the meaning of the tools that need it and ranks in the first pass
for requests that describe only the final goal. Here one hop:
``v_i' = normalise(v_i + beta * mean(v_j for j in N(i)))``, ``N(i)`` the tools ``i`` depends on
(``out``), the tools that depend on ``i`` (``in``) or both; a tool without neighbours keeps its vector.

``grid`` builds each dataset's registries as ``toolweave bench`` does (declared graph; inferred graph,
edges inferred at ingest; embeddings from the disk cache), takes the registry's own tool matrix and
graphs, and for every smoothed matrix replays every query through the real pipeline
(``toolweave.retrieval.retrieve``, default settings: fleet fusion, decomposition by sentences) over a
``SmoothedIndex``: full-text hits from the live registry, vector hits (top 30 by cosine, as the registry
ranks them) from the smoothed matrix, for the whole query and for each part alike. The unsmoothed
matrix must give the live registry's vector hits query by query (checked on every search) and the
real-path figures (bench/HISTORY.md). Smoothing graphs: ``declared`` (walked by grtf declared), the
inferred edges retrieval walks (confidence >= ``infer_min_confidence``) and every stored inferred edge
(both walked by grtf inferred, which walks the confident ones only, as the product does).

``lodo`` chooses among the variants with the protocol of the decomposition work (ranking_decompose's
``_fold_choice``): a variant may cost no unit (query set, or split of one; grtf on the declared and on
the inferred graph) of the datasets it is chosen on more than 0.002 mAP@10 against no smoothing; the
best mean gain wins, each dataset weighing the same. ToolLinkOS ``test`` is never a choice unit.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from statistics import fmean
from typing import Literal, TypeVar

import numpy as np
from ranking_decompose import DO_NO_HARM, _cpu_ms, _fold_choice
from ranking_recording import OUT

from toolweave.benchmark import load_dataset
from toolweave.benchmark.datasets import BenchDataset
from toolweave.benchmark.embedding_cache import CachedEmbedder
from toolweave.benchmark.recorded import RecordedGraph
from toolweave.names import NameVocabulary
from toolweave.records import DependencyEdge, SearchResults, SearchScope
from toolweave.registry import Embedder, Registry
from toolweave.retrieval import retrieve
from toolweave.retrieval.metrics import average_precision, recall
from toolweave.retrieval.query import QueryVariant
from toolweave.retrieval.results import Hit
from toolweave.settings import RetrievalSettings, Settings

Direction = Literal["out", "in", "both"]
BETAS = (0.1, 0.2, 0.35, 0.5)
DIRECTIONS: tuple[Direction, ...] = ("out", "in", "both")
SMOOTHING_GRAPHS = {"declared": "declared", "inferred": "inferred", "inferred-all": "inferred"}
"""Graph whose edges smooth the vectors → graph grtf walks with them (the registry that holds both)."""
NONE = "whole query (today)"
"""``_fold_choice``'s name for the baseline (no smoothing)."""
HELD_BACK = {("toollinkos", "instances/test")}
"""Units never chosen on (reported once, after the choice)."""


def smooth(
    matrix: np.ndarray,
    ids: Sequence[str],
    pairs: Iterable[tuple[str, str]],
    beta: float,
    direction: Direction,
) -> np.ndarray:
    """One hop of graph smoothing over ``pairs`` (``(tool, depends_on)``): ``out`` = a tool borrows from
    what it depends on, ``in`` = from what depends on it (TGR's prerequisite that borrows its dependents'
    meaning), ``both``. A new matrix; rows without neighbours are copied unchanged, a repeated
    neighbour counts once."""
    row = {tool_id: n for n, tool_id in enumerate(ids)}
    links: set[tuple[int, int]] = set()
    for tool, dep in pairs:
        a, b = row.get(tool), row.get(dep)
        if a is None or b is None or a == b:
            continue
        if direction in ("out", "both"):
            links.add((a, b))
        if direction in ("in", "both"):
            links.add((b, a))
    out = np.array(matrix, dtype=np.float32, copy=True)
    if not links or beta <= 0:
        return out
    edges = np.array(sorted(links), dtype=np.int64)
    sums = np.zeros_like(out)
    np.add.at(sums, edges[:, 0], matrix[edges[:, 1]])
    counts = np.bincount(edges[:, 0], minlength=len(out))
    touched = np.flatnonzero(counts)
    mixed = matrix[touched] + beta * sums[touched] / counts[touched, None]
    out[touched] = mixed / np.linalg.norm(mixed, axis=1, keepdims=True)
    return out


T = TypeVar("T")


@dataclass(eq=False)
class SmoothedIndex:
    """A ``SearchIndex`` whose vector side ranks ``matrix`` (the registry's ``_rank``, exact cosine) and
    whose full-text side is the live registry's, recorded. Hashed by identity: ``fleet`` fusion keeps
    one record per index, so each run gets its own ``view``."""

    live: Registry
    ids: tuple[str, ...]
    matrix: np.ndarray
    base: np.ndarray
    """The registry's own matrix: its ranking must equal the live vector hits (checked per search)."""
    text: dict[tuple[QueryVariant, int], list[Hit]] = field(default_factory=dict)
    vectors: dict[str, np.ndarray] = field(default_factory=dict)

    def view(self, matrix: np.ndarray) -> SmoothedIndex:
        return SmoothedIndex(self.live, self.ids, matrix, self.base, self.text, self.vectors)

    def _rank(self, matrix: np.ndarray, query: np.ndarray, k: int) -> list[Hit]:
        scores = matrix @ query  # as ``SnapshotSearch._rank`` (no usage vectors, no excluded source)
        k = min(k, len(self.ids))
        top = np.argpartition(-scores, k - 1)[:k]
        top = top[np.argsort(-scores[top], kind="stable")]
        return [Hit(self.ids[i], float(scores[i])) for i in top]

    def _record(self, queries: Sequence[QueryVariant], k: int) -> None:
        todo = [q for q in dict.fromkeys(queries) if (q, k) not in self.text]
        if not todo:
            return
        if any(len(q) != 1 for q in todo):
            raise SystemExit("the lab replays queries without conversation context")
        for q, (vector_hits, text_hits) in zip(todo, self.live.search(todo, k), strict=True):
            self.text[(q, k)] = text_hits
            if q[0] not in self.vectors:  # normalised again, as ``SnapshotSearch._search`` composes it
                (v,) = self.live.embedder.embed_queries([q[0]])
                self.vectors[q[0]] = v / (np.linalg.norm(v) or 1.0)
            vec = self.vectors[q[0]]
            mine = self._rank(self.base, vec, k)
            if [h.tool_id for h in mine] != [h.tool_id for h in vector_hits] or any(
                abs(a.score - b.score) > 1e-6 for a, b in zip(mine, vector_hits, strict=True)
            ):
                raise SystemExit(f"vector hits differ from the live registry's for {q[0]!r}")

    def search(
        self, queries: Sequence[QueryVariant], k: int, scope: SearchScope | None = None
    ) -> SearchResults:
        scope = scope or SearchScope()
        if scope.exclude_sources:
            raise SystemExit("the lab searches every source")
        self._record(queries, k)
        return [
            (
                self._rank(self.matrix, self.vectors[q[0]], k) if scope.vector else [],
                self.text[(q, k)] if scope.text else [],
            )
            for q in queries
        ]

    def is_destructive(self, tool_id: str) -> bool:
        return self.live.is_destructive(tool_id)

    def name_vocabulary(self) -> NameVocabulary:
        return self.live.name_vocabulary()

    def calibration(self, key: str, compute: Callable[[Sequence[str]], T]) -> T:
        return self.live.calibration(key, compute)


@dataclass
class Fleet:
    """One dataset's registry (declared graph; searched) and its graphs."""

    data: BenchDataset
    index: SmoothedIndex
    names: dict[str, str]
    walk: dict[str, RecordedGraph]
    """``declared`` / ``inferred`` → the edges grtf walks (as ``SnapshotSearch.dependencies``)."""
    pairs: dict[str, list[tuple[str, str]]]
    """Smoothing graph (``SMOOTHING_GRAPHS``) → ``(tool, depends_on)`` pairs."""


def build(name: str, embedder: Embedder, tmp: Path) -> Fleet:
    data = load_dataset(name)
    if any(t.examples for t in data.tools):
        raise SystemExit(f"{name}: tools with usage examples (Tool2Vec) are not replayed by the lab")
    walk: dict[str, RecordedGraph] = {}
    pairs: dict[str, list[tuple[str, str]]] = {}
    live: Registry | None = None
    for graph in ("inferred", "declared"):  # the declared registry stays open: it is searched
        settings = Settings(infer_dependencies=graph == "inferred")
        reg = Registry.open(tmp / name / graph, embedder=embedder, settings=settings)
        t0 = time.perf_counter()
        reg.ingest(data.name, data.tools, data.edges if graph == "declared" else [])
        print(f"{name}: {graph} registry in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
        deps: dict[str, list[DependencyEdge]] = {t.id: reg.dependencies(t.id) for t in reg.tools()}
        walk[graph] = RecordedGraph(deps)
        pairs[graph] = [(e.tool, e.depends_on) for es in deps.values() for e in es]
        if graph == "inferred":
            pairs["inferred-all"] = [(e.tool, e.depends_on) for e in reg.edges()]
            reg.close()
        else:
            live = reg
    assert live is not None
    rows = live.vectors()
    ids = tuple(rows)
    matrix = rows.stack(ids)
    names = {t.id: t.name for t in live.tools()}
    return Fleet(data, SmoothedIndex(live, ids, matrix, matrix), names, walk, pairs)


Scores = dict[str, list[tuple[float, float]]]
"""unit → (AP@10, Recall@5) per query."""


def units_of(data: BenchDataset) -> dict[str, list[tuple[str, str]]]:
    """query set → (unit, all-unit) per query: a set with several splits counts by split."""
    out = {}
    for set_name, qs in data.query_sets.items():
        splits = {q.split for q in qs}
        out[set_name] = [
            (f"{set_name}/{q.split}" if len(splits) > 1 else set_name, f"{set_name}/all") for q in qs
        ]
    return out


def replay(fleet: Fleet, matrix: np.ndarray, method: str, walk: str | None) -> Scores:
    """Every query of every set in ``toolweave bench`` order through ``retrieve`` on one index."""
    index = fleet.index.view(matrix)
    deps = fleet.walk[walk] if walk else RecordedGraph({})
    params = RetrievalSettings(method=method)
    units = units_of(fleet.data)
    scores: Scores = {}
    for set_name, qs in fleet.data.query_sets.items():
        for q, (unit, whole) in zip(qs, units[set_name], strict=True):
            ranked = [fleet.names[r.tool_id] for r in retrieve(q.text, index, deps, params)]
            m = (average_precision(ranked, q.gold, 10), recall(ranked, q.gold, 5))
            for u in dict.fromkeys((unit, whole)):
                scores.setdefault(u, []).append(m)
    return scores


def grid(names: list[str]) -> None:
    """Baseline and every smoothing variant × (hybrid, grtf on the graph it belongs to), per unit."""
    embedder = CachedEmbedder(Embedder())
    for name in names:
        rows: list[dict[str, object]] = []
        with tempfile.TemporaryDirectory(prefix="toolweave-smooth-") as tmp:
            fleet = build(name, embedder, Path(tmp))
            base = fleet.index.base
            runs: list[tuple[str, str, np.ndarray, str, str | None]] = [
                ("none", "-", base, "hybrid", None),
                ("none", "-", base, "grtf", "declared"),
                ("none", "-", base, "grtf", "inferred"),
            ]
            for sgraph, wgraph in SMOOTHING_GRAPHS.items():
                for beta in BETAS:
                    for direction in DIRECTIONS:
                        smoothed = smooth(base, fleet.index.ids, fleet.pairs[sgraph], beta, direction)
                        label = f"beta={beta} {direction}"
                        if np.array_equal(smoothed, base):
                            continue  # no edges to smooth over: ``_deltas`` counts it as Δ 0
                        runs.append((label, sgraph, smoothed, "hybrid", None))
                        runs.append((label, sgraph, smoothed, "grtf", wgraph))
            edges = {g: len(p) for g, p in fleet.pairs.items()}
            print(f"{name}: smoothing edges {edges}, {len(runs)} runs", file=sys.stderr)
            for label, sgraph, matrix, method, walk in runs:
                w0, c0, load = time.perf_counter(), _cpu_ms(), Path("/proc/loadavg").read_text().split()[0]
                scores = replay(fleet, matrix, method, walk)
                for unit, ms in scores.items():
                    row = {
                        "dataset": name,
                        "unit": unit,
                        "variant": label,
                        "smoothing_graph": sgraph,
                        "method": method,
                        "walk": walk or "-",
                        "map@10": round(fmean(m[0] for m in ms), 6),
                        "recall@5": round(fmean(m[1] for m in ms), 6),
                        "queries": len(ms),
                    }
                    rows.append(row)
                print(
                    json.dumps(
                        {
                            "dataset": name,
                            "variant": label,
                            "smoothing_graph": sgraph,
                            "method": method,
                            "walk": walk or "-",
                            "all": {
                                u: round(fmean(m[0] for m in ms), 4)
                                for u, ms in scores.items()
                                if u.endswith("/all")
                            },
                            "wall_s": round(time.perf_counter() - w0, 1),
                            "cpu_s": round((_cpu_ms() - c0) / 1000, 1),
                            "load_1min": load,
                        }
                    ),
                    flush=True,
                )
            fleet.index.live.close()
        with (OUT / f"smoothing-{name}.json").open("w") as f:
            json.dump({"edges": edges, "rows": rows}, f)


def _deltas(
    rows: list[dict[str, object]], held_back: bool = False
) -> dict[str, dict[str, dict[tuple[str, str], float]]]:
    """variant (``beta=… direction, walked|all inferred edges``) → dataset → (unit, walked graph) → Δ
    mAP@10 of grtf against no smoothing: the choice units, or (``held_back``) the units never chosen on.
    A product smooths over the registry's graph: declared edges where the walk is declared, inferred
    ones (the walked or all) where it is inferred. A variant with no run on a graph (no edges there)
    equals the baseline there (Δ 0)."""
    fig: dict[tuple[str, str, str, str, str], float] = {}
    for r in rows:
        if r["method"] == "grtf" and not str(r["unit"]).endswith("/all"):
            key = tuple(str(r[k]) for k in ("variant", "smoothing_graph", "dataset", "unit", "walk"))
            fig[key] = float(r["map@10"])  # type: ignore[index, arg-type]
    units = {(k[2], k[3]) for k in fig if k[0] == "none"}
    out: dict[str, dict[str, dict[tuple[str, str], float]]] = {NONE: {}}
    for label in [f"beta={b} {d}" for b in BETAS for d in DIRECTIONS]:
        for inferred in ("inferred", "inferred-all"):
            variant = f"{label}, {'walked' if inferred == 'inferred' else 'all'} inferred edges"
            for dataset, unit in sorted(units):
                if ((dataset, unit) in HELD_BACK) != held_back:
                    continue
                for walk, sgraph in (("declared", "declared"), ("inferred", inferred)):
                    before = fig[("none", "-", dataset, unit, walk)]
                    now = fig.get((label, sgraph, dataset, unit, walk), before)
                    out.setdefault(variant, {}).setdefault(dataset, {})[(unit, walk)] = now - before
                    out[NONE].setdefault(dataset, {})[(unit, walk)] = 0.0
    return out


def lodo(paths: list[Path]) -> None:
    """The fold choices (JSON lines), the held-back units under the choice on all datasets, and the grid
    as a Markdown table (Δ mAP@10 per choice unit)."""
    rows = [r for p in paths for r in json.loads(p.read_text())["rows"]]
    deltas = _deltas(rows)
    datasets = sorted({n for by in deltas.values() for n in by})
    for held_out in [*datasets, None]:
        others = [n for n in datasets if n != held_out]
        chosen, score = _fold_choice(deltas, others)
        judged = deltas[chosen][held_out] if held_out else {}
        row = {
            "left_out": held_out or "(none: all datasets)",
            "chosen": chosen,
            "in_sample_mean_gain": round(score, 4),
            "in_sample_worst": round(min(d for n in others for d in deltas[chosen][n].values()), 4),
            "out_of_sample": {f"{u}@{g}": round(d, 4) for (u, g), d in judged.items()},
        }
        print(json.dumps(row), flush=True)
    held = _deltas(rows, held_back=True)
    print(
        json.dumps(
            {
                "held_back_under_the_choice_on_all": chosen,
                **{
                    f"{n}:{u}@{g}": round(d, 4)
                    for n, by in held.get(chosen, {}).items()
                    for (u, g), d in by.items()
                },
            }
        )
    )
    columns = [(n, key) for n in datasets for key in deltas[NONE][n]]
    print("| variant | " + " | ".join(f"{n} {u} {g}" for n, (u, g) in columns) + " | worst | mean |")
    print("|---" * (len(columns) + 3) + "|")
    for variant, by in deltas.items():
        cells = [by[n][key] for n, key in columns]
        mean = fmean(fmean(by[n].values()) for n in datasets)
        print(
            f"| {variant} | "
            + " | ".join(f"{d:+.4f}" for d in cells)
            + f" | {min(cells):+.4f} | {mean:+.4f} |"
        )
    print(f"do no harm: no choice unit below {DO_NO_HARM}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("command", choices=["grid", "lodo"])
    parser.add_argument(
        "datasets", nargs="*", default=["toollinkos", "api_bank", "seal_tools", "openapi_links", "metatool"]
    )
    parser.add_argument("--rows", action="extend", nargs="+", default=[], help="lodo: grid JSON files")
    args = parser.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    if args.command == "grid":
        grid(args.datasets)
    else:
        lodo([Path(p) for p in args.rows])


if __name__ == "__main__":
    main()
