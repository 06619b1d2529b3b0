"""Inferred dependency graphs: calibration on every gold graph, edge precision / recall, and retrieval
with the inferred graph against no graph (hybrid) and the dataset's own graph.

    python bench/inference.py calibrate [--table]
        per rule and gold graph: proposed pairs that are gold / proposed pairs; the leave-one-family-out
        confidences and the shipped ones (``--table`` prints the ``calibration.RULE_CONFIDENCE``
        block they give, to paste by hand: a runner never writes product source)
    python bench/inference.py graphs [--json]
        per gold graph: precision / recall / F1 of every inferred edge (what ``toolweave bench-graph``
        scores) and of the walked ones, with the shipped table (in sample) and with the table
        calibrated without that graph's source (out of sample)
    python bench/inference.py retrieval DATASET... [--split examples] [--save-edges DIR] [--before DIR]
        mAP@10 of hybrid, grtf with no graph, the inferred graph (shipped table; the table recalibrated
        on today's gold graphs; on a gold-graph fleet also out of sample), the declared graph and, on a
        fleet whose graph is read from code (BFCL multi-turn), that graph, through the real pipeline
        (``retrieve``): the figures are ``toolweave bench NAME --method grtf --graph ...``'s. One first
        pass per dataset, replayed for every graph.

Gold graphs are the folders of ``calibration.GOLD_FAMILIES`` under ``../shared/datasets``, read by
``toolweave.benchmark.gold_graphs`` (OpenAPI-links from its specs, with their response schemas).
ToolLinkOS's ``test`` split is used for nothing but ``retrieval --split test``.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from toolweave.benchmark import load_dataset
from toolweave.benchmark.embedding_cache import CachedEmbedder
from toolweave.benchmark.gold_graphs import CODE_GRAPHS, all_rule_counts, code_gold_edges, gold_graph
from toolweave.benchmark.recorded import RecordedIndex
from toolweave.inference import infer_edges, score_edges, walkable
from toolweave.inference.calibration import (
    GOLD_FAMILIES,
    RuleCounts,
    out_of_sample,
    pooled,
    shipped,
)
from toolweave.records import DependencyEdge, EdgeKind, ToolRecord
from toolweave.registry.embeddings import Embedder
from toolweave.registry.graph import DependencyGraph
from toolweave.registry.registry import Registry
from toolweave.retrieval.metrics import summarize
from toolweave.retrieval.pipeline import retrieve
from toolweave.settings import RetrievalSettings, Settings

Lookup = Callable[[str, Sequence[EdgeKind] | None], list[DependencyEdge]]
GOLD_OF = {"nestful": "nestful_graph"}
"""Query folders whose tools have a gold graph in another folder (the graph comes from their queries)."""
CALIBRATION = Path(__file__).resolve().parents[1] / "toolweave/inference/calibration.py"


def calibration_table(counts: RuleCounts) -> list[str]:
    """The markdown table of ``calibrate``: counts per gold graph, leave-one-family-out, shipped."""
    graphs = list(counts)
    families = sorted({GOLD_FAMILIES[g] for g in graphs})
    folds = {f: pooled(counts, frozenset(g for g in graphs if GOLD_FAMILIES[g] == f)) for f in families}
    whole, final = pooled(counts), shipped(counts)
    lines = [
        "| rule | "
        + " | ".join(graphs)
        + " | pooled | "
        + " | ".join(f"without {f}" for f in families)
        + " | shipped (min) |",
        "|---" * (3 + len(graphs) + len(families)) + "|",
    ]
    for r in whole:
        cells = [f"{counts[g].get(r, (0, 0))[0]}/{counts[g].get(r, (0, 0))[1]}" for g in graphs]
        lodo = [str(folds[f][r]) for f in families]
        lines.append(
            f"| {r} | " + " | ".join(cells) + f" | {whole[r]} | " + " | ".join(lodo) + f" | **{final[r]}** |"
        )
    return lines


def table_block(table: Mapping[str, float]) -> str:
    """The ``RULE_CONFIDENCE`` block of ``calibration.py`` that ``table`` gives (printed, never written:
    ``tests/registry/inference`` fails while the shipped block differs from what calibration gives)."""
    body = "".join(f'    "{r}": {"NO_EVIDENCE" if c == 0.333 else c},\n' for r, c in sorted(table.items()))
    return "RULE_CONFIDENCE: Mapping[str, float] = {\n" + body + "}\n"


def graph_scores(min_confidence: float) -> list[dict[str, object]]:
    """Per gold graph, in and out of sample: every inferred edge and the walked ones vs the gold."""
    counts = all_rule_counts()
    rows: list[dict[str, object]] = []
    for name in GOLD_FAMILIES:
        tools, gold = gold_graph(name)
        for sample, table in (("in", shipped(counts)), ("out", out_of_sample(counts, name))):
            edges = infer_edges(tools, confidence=table)
            for part, chosen in (("stored", edges), ("walked", walkable(edges, min_confidence))):
                s = score_edges(chosen, gold)
                rows.append(
                    {
                        "graph": name,
                        "sample": sample,
                        "edges": part,
                        "gold": s.gold_edges,
                        "predicted": s.predicted_edges,
                        "matched": s.matched,
                        "precision": round(s.precision, 3),
                        "recall": round(s.recall, 3),
                        "f1": round(s.f1, 3),
                    }
                )
    return rows


def _lookup(tools: Sequence[ToolRecord], edges: Sequence[DependencyEdge]) -> Lookup:
    """What ``Registry.dependencies`` answers for a graph of these edges (already walkable)."""
    graph = DependencyGraph()
    for t in tools:
        graph.add_tool(t.id, t.kind, t.source)
    graph.add_edges(edges)

    def dependencies(tool_id: str, kinds: Sequence[EdgeKind] | None = None) -> list[DependencyEdge]:
        return [e for e in graph.dependencies(tool_id) if kinds is None or e.kind in kinds]

    return dependencies


def retrieval_rows(args: argparse.Namespace) -> list[dict[str, object]]:
    counts = all_rule_counts()
    embedder = CachedEmbedder(Embedder())
    rows: list[dict[str, object]] = []
    for name in args.datasets:
        dataset = load_dataset(name)
        with tempfile.TemporaryDirectory(prefix="toolweave-inference-bench-") as tmp:
            registry = Registry.open(
                Path(tmp) / "r", embedder=embedder, settings=Settings(infer_dependencies=False)
            )
            registry.ingest(dataset.name, dataset.tools, [])
            records = list(registry.tools())
            vectors = registry.vectors()  # the similarity pass, as an ingest runs it
            inferred = infer_edges(records, vectors=vectors)
            graphs: dict[str, list[DependencyEdge]] = {
                "none": [],
                "inferred": walkable(inferred, args.min_confidence),
                # what the shipped table would be, recalibrated on today's gold graphs (``--table``)
                "inferred_recalibrated": walkable(
                    infer_edges(records, vectors=vectors, confidence=shipped(counts)), args.min_confidence
                ),
                "declared": dataset.edges,
            }
            if dataset.name in CODE_GRAPHS:  # its code-read gold graph, walked as declared
                graphs["code"] = code_gold_edges(dataset.path, records)
            gold = GOLD_OF.get(dataset.name, dataset.name)
            if (
                gold in GOLD_FAMILIES
            ):  # a gold-graph fleet: also with confidences calibrated without its source
                table = out_of_sample(counts, gold)
                graphs["inferred_out_of_sample"] = walkable(
                    infer_edges(records, vectors=vectors, confidence=table), args.min_confidence
                )
            if args.save_edges:
                out = Path(args.save_edges)
                out.mkdir(parents=True, exist_ok=True)
                doc = [e.model_dump(mode="json") for e in inferred]
                (out / f"{dataset.name}.json").write_text(json.dumps(doc), encoding="utf-8")
            if args.before:
                before = json.loads((Path(args.before) / f"{dataset.name}.json").read_text(encoding="utf-8"))
                old = [DependencyEdge.model_validate(e) for e in before]
                graphs["inferred_before"] = walkable(old, args.min_confidence)
            names = {t.id: t.name for t in records}
            recorded = RecordedIndex(live=registry)
            runs: list[tuple[str, str, list[DependencyEdge]]] = [("hybrid", "none", [])]
            runs += [("grtf", g, edges) for g, edges in graphs.items()]
            for set_name, queries in dataset.query_sets.items():
                split = args.split if dataset.name == "toollinkos" else "all"
                chosen = [q for q in queries if split == "all" or q.split == split]
                for method, gname, edges in runs:
                    params = RetrievalSettings().model_copy(update={"method": method})
                    view, lookup = recorded.view(), _lookup(records, edges)
                    ranked = [retrieve(q.text, view, lookup, params) for q in chosen]
                    scored = [
                        ([names[r.tool_id] for r in rs], q.gold) for rs, q in zip(ranked, chosen, strict=True)
                    ]
                    m = summarize(scored, (10,))
                    row = {
                        "dataset": dataset.name,
                        "queries_file": set_name,
                        "split": split,
                        "queries": len(chosen),
                        "method": method,
                        "graph": gname,
                        "edges": len(edges),
                        "map@10": round(m["map@10"], 4),
                        "recall@10": round(m["recall@10"], 4),
                        "complete@10": round(m["complete@10"], 4),
                    }
                    rows.append(row)
                    print(json.dumps(row), flush=True)
    return rows


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)
    cal = sub.add_parser("calibrate", help="per-rule calibration on every gold graph")
    cal.add_argument(
        "--table", action="store_true", help="print the calibration.RULE_CONFIDENCE block to paste by hand"
    )
    graphs = sub.add_parser("graphs", help="precision / recall / F1 per gold graph, in and out of sample")
    graphs.add_argument("--json", action="store_true")
    ret = sub.add_parser("retrieval", help="grtf with the inferred graph vs hybrid, no graph and declared")
    ret.add_argument("datasets", nargs="+")
    ret.add_argument("--split", default="all", help="all, examples or test (ToolLinkOS split.json)")
    ret.add_argument("--save-edges", default="")
    ret.add_argument("--before", default="")
    for p in (graphs, ret):
        p.add_argument("--min-confidence", type=float, default=Settings().infer_min_confidence)
    args = ap.parse_args(argv)
    if args.command == "calibrate":
        counts = all_rule_counts()
        print("\n".join(calibration_table(counts)))
        if args.table:
            print(f"\n# paste into {CALIBRATION}:\n{table_block(shipped(counts))}")
    elif args.command == "graphs":
        rows = graph_scores(args.min_confidence)
        if args.json:
            print(json.dumps(rows, indent=1))
        else:
            print("| gold graph | sample | edges | predicted / matched | P | R | F1 |")
            print("|---|---|---|---|---|---|---|")
            for r in rows:
                print(
                    f"| {r['graph']} | {r['sample']} | {r['edges']} | {r['predicted']} / {r['matched']} "
                    f"| {r['precision']} | {r['recall']} | {r['f1']} |"
                )
    else:
        retrieval_rows(args)


if __name__ == "__main__":
    main()
