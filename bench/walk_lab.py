"""The dependency walk on recorded first passes: which edges to walk, chosen leave-one-dataset-out.

    .venv/bin/python bench/walk_lab.py record toollinkos api_bank ...   # once per dataset (minutes)
    .venv/bin/python bench/walk_lab.py check                            # the lab = the real pipeline
    .venv/bin/python bench/walk_lab.py grid [--with-test]               # every walk variant, every graph
    .venv/bin/python bench/walk_lab.py lodo [--rows bench/out/walk/grid] [--variants REGEX]
    .venv/bin/python bench/walk_lab.py grid --supplied                  # the request-value rule's forms
    .venv/bin/python bench/walk_lab.py cost toollinkos nestful        # CPU per query of the walk
    .venv/bin/python bench/walk_lab.py compare [--with-test]          # hybrid / paper / shipped, every graph
    .venv/bin/python bench/walk_lab.py learned                        # BFCL multi-turn with learned edges

``record`` builds each dataset's registry once (embeddings from the disk cache) and runs every query,
in the order ``toolweave bench`` asks them, through the real pipeline up to the walk
(``pipeline.candidates``: decomposition, fleet fusion, name match, with the gateway's defaults): the
candidates the walk starts from do not depend on the walk, so each walk variant is a replay of seconds.
It keeps the search hits too (``check`` replays them through ``retrieve`` and compares), the tool
records (the walk reads their parameter schemas) and the graphs: ``declared``; ``inferred`` (what the
registry walks: inferred edges at or above ``infer_min_confidence``); ``inferred_all`` (every stored
inferred edge, as if the bar were 0: a graph with many wrong edges, the robustness check for rules not
written yet); for NESTFUL ``gold`` (``nestful_graph``'s edges, read from NESTFUL's gold sequences: a
check only, never in a choice set).
"""

from __future__ import annotations

import argparse
import json
import pickle
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from statistics import fmean

from labs.supplied import request_values

from toolweave.benchmark import load_dataset
from toolweave.benchmark.datasets import edges_from
from toolweave.benchmark.embedding_cache import CachedEmbedder
from toolweave.benchmark.recorded import RecordedGraph, RecordedIndex
from toolweave.records import DependencyEdge, Hit, ToolRecord
from toolweave.registry import Embedder, Registry
from toolweave.retrieval.metrics import average_precision, complete, recall
from toolweave.retrieval.pipeline import candidates, decomposition_of, retrieve
from toolweave.retrieval.query import clean_query
from toolweave.retrieval.results import RankedTool
from toolweave.settings import RetrievalSettings, Settings

OUT = Path(__file__).parent / "out" / "walk"
DATASET_ROOT = Path(__file__).resolve().parents[1] / ".." / "shared" / "datasets"
DATASETS = [
    "toollinkos",
    "api_bank",
    "openapi_links",
    "nestful",
    "bfcl_multi_turn",
    "bfcl_multiple",
    "seal_tools",
    "toolalpaca",
    "metatool",  # no edges in any graph (MetaTool gives no parameters): grtf = hybrid, by ``check``
]
GOLD_GRAPH_OF = {"nestful": "nestful_graph"}
"""A gold graph kept apart from the queries it was read from: walked as a check, never chosen on."""


@dataclass
class Query:
    set_name: str
    split: str | None
    text: str
    """As the pipeline cleans it (``clean_query``)."""
    gold: tuple[str, ...]
    candidates: list[Hit]
    """The walk's input: the fused, decomposed, name-matched first pass (``pipeline.candidates``)."""


@dataclass
class Recording:
    name: str
    queries: list[Query]
    names: dict[str, str]
    records: dict[str, ToolRecord]
    graphs: dict[str, dict[str, list[DependencyEdge]]]
    hits: dict[tuple[str, ...], tuple[list[Hit], list[Hit]]] = field(default_factory=dict)
    """The raw search hits of every variant (``check`` replays them through ``retrieve``)."""


def record(name: str, embedder: Embedder) -> Recording:
    data = load_dataset(name)
    params = RetrievalSettings()
    pool = max(params.final_k, params.top_k)
    graphs: dict[str, dict[str, list[DependencyEdge]]] = {}
    queries: list[Query] = []
    with tempfile.TemporaryDirectory(prefix="toolweave-walk-") as tmp:
        inferred = Registry.open(Path(tmp) / "inferred", embedder=embedder, settings=Settings())
        t0 = time.perf_counter()
        inferred.ingest(data.name, data.tools, [])
        print(f"{name}: inferred registry in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
        ids = [t.id for t in inferred.tools()]
        graphs["inferred"] = {i: inferred.dependencies(i) for i in ids}
        graphs["inferred_all"] = {i: inferred.graph.dependencies(i) for i in ids}
        inferred.close()
        reg = Registry.open(
            Path(tmp) / "declared", embedder=embedder, settings=Settings(infer_dependencies=False)
        )
        reg.ingest(data.name, data.tools, data.edges)
        graphs["declared"] = {i: reg.dependencies(i) for i in ids}
        if name in GOLD_GRAPH_OF:
            gold: dict[str, list[DependencyEdge]] = {}
            for edge in edges_from(data, GOLD_GRAPH_OF[name]):
                gold.setdefault(edge.tool, []).append(edge)
            graphs["gold"] = gold
        index = RecordedIndex(live=reg)  # one index for every query: the fleet record learns as in bench
        t0 = time.perf_counter()
        for set_name, qs in data.query_sets.items():
            for q in qs:
                text = clean_query(q.text)
                hits, _cosine = candidates(text, (), index, params, pool, (), decomposition_of(params))
                queries.append(Query(set_name, q.split, text, q.gold, hits))
        print(f"{name}: {len(queries)} queries in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
        names = {t.id: t.name for t in reg.tools()}
        records = {t.id: t for t in reg.tools()}
        reg.close()
    return Recording(name, queries, names, records, graphs, index.hits)


def load(name: str) -> Recording:
    with (OUT / f"{name}.pkl").open("rb") as f:
        rec: Recording = pickle.load(f)
    return rec


Walker = Callable[[Query, RecordedGraph, Recording], list[RankedTool]]


def scores(rec: Recording, graph: str, walker: Walker) -> list[tuple[float, float, float, float, int]]:
    """Per query: AP@10, Recall@5, Recall@10, Complete@10 of ``walker`` on ``graph``, and how many
    of its first 10 tools the walk brought."""
    deps = RecordedGraph(rec.graphs.get(graph, {}))
    out = []
    for q in rec.queries:
        tools = walker(q, deps, rec)
        ranked = [rec.names[r.tool_id] for r in tools]
        out.append(
            (
                average_precision(ranked, q.gold, 10),
                recall(ranked, q.gold, 5),
                recall(ranked, q.gold, 10),
                complete(ranked, q.gold, 10),
                sum(r.reason == "dependency" for r in tools[:10]),
            )
        )
    return out


def per_set(
    rec: Recording, per_query: Sequence[tuple[float, ...]], with_test: bool, column: int = 0
) -> dict[str, float]:
    """mAP@10 (or another ``scores`` column) per query set (``set``; ToolLinkOS by split, ``test``
    only ``with_test``)."""
    groups: dict[str, list[float]] = {}
    for q, m in zip(rec.queries, per_query, strict=True):
        if rec.name == "toollinkos":
            if q.split == "test" and not with_test:
                continue
            label = f"{q.set_name}/{q.split}"
        else:
            label = q.set_name
        groups.setdefault(label, []).append(m[column])
    return {label: fmean(v) for label, v in groups.items()}


def hybrid(q: Query, _deps: RecordedGraph, _rec: Recording) -> list[RankedTool]:
    return [RankedTool(h.tool_id, n, "first_pass", h.score) for n, h in enumerate(q.candidates[:10], 1)]


def check(names: list[str]) -> None:
    """The lab measures the product. On every query and graph: the product's walk over the candidates
    replayed in this process equals ``retrieve`` on the recorded search hits (whole pipeline:
    decomposition, fusion, name match, walk); the lab's ``LabPolicy`` at the product's values equals the
    product's walk; the lab's paper walk equals the paper's DFS (``walk_orderings.expand_with_ordering``,
    every option off). Also counted: queries whose replayed candidates are not the recorded ones in
    the same order (name match sums word weights over a set, whose order changes with each process's
    string hashing: exact ties between candidates may come out either way)."""
    from walk_orderings import expand_with_ordering
    from walk_variants import PAPER, SHIPPED, product_walker, walker

    params = RetrievalSettings()
    pool = max(params.final_k, params.top_k)
    for name in names:
        rec = load(name)
        for graph in rec.graphs:
            deps = RecordedGraph(rec.graphs[graph])
            index = RecordedIndex(records=dict(rec.records), hits=rec.hits)
            again = RecordedIndex(records=dict(rec.records), hits=rec.hits)  # its own fleet record
            differ = {"pipeline": 0, "lab policy": 0, "paper": 0}
            reordered = 0
            for q in rec.queries:
                real = [r.tool_id for r in retrieve(q.text, index, deps, params)]
                hits, _ = candidates(q.text, (), again, params, pool, (), decomposition_of(params))
                reordered += [h.tool_id for h in hits] != [h.tool_id for h in q.candidates]
                replayed = Query(q.set_name, q.split, q.text, q.gold, hits)
                product = [r.tool_id for r in product_walker(replayed, deps, rec)]
                lab = [r.tool_id for r in walker(SHIPPED)(replayed, deps, rec)]
                paper = [r.tool_id for r in walker(PAPER)(replayed, deps, rec)]
                dfs = expand_with_ordering(hits, deps, top_k=params.top_k, final_k=params.final_k)
                differ["pipeline"] += real != product
                differ["lab policy"] += lab != product
                differ["paper"] += paper != [r.tool_id for r in dfs]
            row = {"dataset": name, "graph": graph, "queries": len(rec.queries), "differ": differ}
            row["candidates_reordered_since_recording"] = reordered
            print(json.dumps(row), flush=True)
            if any(differ.values()):
                raise SystemExit(f"{name}/{graph}: the lab's walks differ from the product's")


def compare(names: list[str], with_test: bool) -> None:
    """mAP@10 of hybrid, the paper's walk, the shipped walk and the shipped walk with the request-value
    rule in its chosen form (``walk_variants.SUPPLIED``) on every recorded graph: what to re-run when the
    graph changes (new inference rules, learned edges), without choosing anything again."""
    from walk_variants import PAPER, SUPPLIED, product_walker, walker

    for name in names:
        rec = load(name)
        base = per_set(rec, scores(rec, "declared", hybrid), with_test)
        for graph, edges in rec.graphs.items():
            if not any(edges.values()):
                continue
            paper = per_set(rec, scores(rec, graph, walker(PAPER)), with_test)
            shipped = per_set(rec, scores(rec, graph, product_walker), with_test)
            supplied = per_set(rec, scores(rec, graph, walker(SUPPLIED)), with_test)
            for set_label, h in base.items():
                row = {
                    "dataset": name,
                    "set": set_label,
                    "graph": graph,
                    "edges": sum(len(e) for e in edges.values()),
                    "hybrid": round(h, 4),
                    "paper": round(paper[set_label], 4),
                    "shipped": round(shipped[set_label], 4),
                    "shipped_vs_hybrid": round(shipped[set_label] - h, 4),
                    "supplied": round(supplied[set_label], 4),
                }
                print(json.dumps(row), flush=True)


def with_learned(rec: Recording, bar: float = 0.5) -> list[bool]:
    """BFCL multi-turn with edges learned from traffic: the learning half's gold calls (even dialogue ids,
    results from direct execution) played through the gateway's own observer
    (``traffic_calibration.play``), the edges the registry makes of them (``learned.edge_evidence``) at or
    above the walk's bar, added to ``rec`` as the graphs ``learned`` and ``inferred+learned``. Returns,
    per query, whether it is of the measured half (odd ids)."""
    from traffic_calibration import load_learning_half, number_of, play

    from toolweave.registry.learned import edge_evidence, learned_edge

    ids = {n: i for i, n in rec.names.items()}
    rows, _flow, _order = play(load_learning_half())
    graph: dict[str, list[DependencyEdge]] = {}
    for row, confidence in edge_evidence(rows):
        edge = learned_edge(row, confidence)
        if confidence < bar or edge.tool not in ids or edge.depends_on not in ids:
            continue
        edge = edge.model_copy(update={"tool": ids[edge.tool], "depends_on": ids[edge.depends_on]})
        graph.setdefault(edge.tool, []).append(edge)
    both = {
        t: [*rec.graphs["inferred"].get(t, []), *graph.get(t, [])] for t in {*graph, *rec.graphs["inferred"]}
    }
    rec.graphs["learned"], rec.graphs["inferred+learned"] = graph, both
    lines = (DATASET_ROOT / "bfcl_multi_turn" / "queries.jsonl").read_text(encoding="utf-8").splitlines()
    dialogue = [json.loads(line)["dialogue_id"] for line in lines if line.strip()]
    return [number_of(d) % 2 == 1 for d in dialogue]


def learned() -> None:
    """BFCL multi-turn with the learned graph (``with_learned``): hybrid / the paper's walk / the shipped
    walk on the measured half (odd ids) and on every turn."""
    from walk_variants import PAPER, product_walker, walker

    rec = load("bfcl_multi_turn")
    measured = with_learned(rec)
    confidences = sorted(e.confidence for es in rec.graphs["learned"].values() for e in es)
    print(json.dumps({"learned_edges": len(confidences), "confidences": confidences}), flush=True)
    for name in ("learned", "inferred+learned", "inferred"):
        for label_, run in (("hybrid", hybrid), ("paper", walker(PAPER)), ("shipped", product_walker)):
            per_query = scores(rec, name, run)
            half = [m[0] for m, keep in zip(per_query, measured, strict=True) if keep]
            print(
                json.dumps(
                    {
                        "graph": name,
                        "walk": label_,
                        "measured_half_map@10": round(fmean(half), 4),
                        "measured_half_complete@10": round(
                            fmean(m[3] for m, keep in zip(per_query, measured, strict=True) if keep), 4
                        ),
                        "all_map@10": round(fmean(m[0] for m in per_query), 4),
                        "measured_turns": len(half),
                    }
                ),
                flush=True,
            )


def cost(names: list[str], repeats: int = 5) -> None:
    """CPU time per query (``time.process_time``: the load-robust figure on a shared machine) of the
    walk: the shipped one against main's DFS and the lab's paper walk over the same candidates and
    graph (declared where it has edges, else inferred); and of the scan of a request for values
    (``supplied.request_values``), which the request-value rule adds."""
    from walk_orderings import expand_with_ordering
    from walk_variants import PAPER, product_walker, walker

    for name in names:
        rec = load(name)
        graph = "declared" if any(rec.graphs["declared"].values()) else "inferred"
        deps = RecordedGraph(rec.graphs[graph])

        def main_walk(q: Query, deps: RecordedGraph, _rec: Recording) -> list[RankedTool]:
            return expand_with_ordering(q.candidates, deps, top_k=3, final_k=10)

        runs = {"main's walk (DFS)": main_walk, "paper walk": walker(PAPER), "shipped walk": product_walker}
        for q in rec.queries:  # warm: relevance and schema caches, as on a gateway's second turn
            for run in runs.values():
                run(q, deps, rec)
        row: dict[str, object] = {"dataset": name, "graph": graph, "queries": len(rec.queries)}
        t0 = time.process_time()
        for _ in range(repeats):
            for q in rec.queries:
                request_values(q.text)
        row["request_values_us"] = round((time.process_time() - t0) / repeats / len(rec.queries) * 1e6, 1)
        for label_, run in runs.items():
            t0 = time.process_time()
            for _ in range(repeats):
                for q in rec.queries:
                    run(q, deps, rec)
            row[f"{label_}_us"] = round((time.process_time() - t0) / repeats / len(rec.queries) * 1e6, 1)
        row["load_1min"] = Path("/proc/loadavg").read_text().split()[0]
        print(json.dumps(row), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("command", choices=["record", "check", "grid", "lodo", "cost", "compare", "learned"])
    parser.add_argument("datasets", nargs="*", default=DATASETS)
    parser.add_argument("--with-test", action="store_true", help="grid: score ToolLinkOS test (once)")
    parser.add_argument("--paper-only", action="store_true", help="grid: the paper's walk alone")
    parser.add_argument("--supplied", action="store_true", help="grid: the request-value rule's forms")
    parser.add_argument("--rows", default=str(OUT / "grid"), help="lodo: the folder of the grid's rows")
    parser.add_argument("--variants", help="lodo: choose only among variants matching this regex")
    args = parser.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    if args.command == "record":
        embedder = CachedEmbedder(Embedder())
        for name in args.datasets:
            rec = record(name, embedder)
            with (OUT / f"{name}.pkl").open("wb") as f:
                pickle.dump(rec, f)
            print(json.dumps({"recorded": name, "queries": len(rec.queries)}), flush=True)
        return
    if args.command == "check":
        check(args.datasets)
        return
    if args.command == "cost":
        cost(args.datasets)
        return
    if args.command == "compare":
        compare(args.datasets, args.with_test)
        return
    if args.command == "learned":
        learned()
        return
    from walk_variants import grid, lodo

    if args.command == "grid":
        grid(args.datasets, args.with_test, args.paper_only, args.supplied)
        return
    lodo(Path(args.rows), args.variants)


if __name__ == "__main__":
    main()
