"""The most any prerequisite walk can give on BFCL multi-turn: hybrid's list with, right after each tool,
its prerequisites in the *true* graph (read from the backends' code) that the turn's gold holds and the
list lacks or holds lower, and nothing else (a perfect do-no-harm walk of the true graph).

    .venv/bin/python bench/walk_ceiling.py                     # offline: every query of queries.jsonl
    .venv/bin/python bench/walk_ceiling.py --replay OUT.json   # the hybrid turns of a replay's --details

``--replay`` reads ``bench/bfcl_replay.py --json --details`` output (its ``cold-inferred-hybrid`` lists, or
``--variant``). Prints the ceiling and how much of it each inserted tool gives.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from toolweave.benchmark import load_dataset
from toolweave.benchmark.embedding_cache import CachedEmbedder
from toolweave.benchmark.gold_graphs import code_gold_edges
from toolweave.benchmark.recorded import RecordedIndex
from toolweave.registry.catalog import load_catalog
from toolweave.registry.embeddings import Embedder
from toolweave.registry.registry import Registry
from toolweave.retrieval.metrics import average_precision
from toolweave.retrieval.pipeline import retrieve
from toolweave.retrieval.query import clean_query
from toolweave.settings import RetrievalSettings, Settings

DATASET = "bfcl_multi_turn"


def ap_at_10(ranked: Sequence[str], gold: Iterable[str]) -> float:
    return average_precision(ranked, gold, 10)


def true_graph() -> dict[str, set[str]]:
    """Tool name → the names of its prerequisites in BFCL's code graph."""
    ds = load_dataset(DATASET)
    tools = load_catalog([ds.path], ds.path.name, require_description=False).tools
    names = {t.id: t.name for t in tools}
    graph: dict[str, set[str]] = {}
    for e in code_gold_edges(ds.path, tools):
        graph.setdefault(names[e.tool], set()).add(names[e.depends_on])
    return graph


def perfect_walk(
    ranked: Sequence[str], gold: Sequence[str], graph: Mapping[str, set[str]]
) -> tuple[list[str], list[str]]:
    """``ranked`` with each tool's gold prerequisites (depth first) right after it, and those inserted."""
    out: list[str] = []
    inserted: list[str] = []
    for tool in ranked:
        if tool not in out:
            out.append(tool)
        stack = sorted(graph.get(tool, ()))
        while stack:
            dep = stack.pop(0)
            if dep in gold and dep not in out:
                out.append(dep)
                inserted.append(dep)
                stack += sorted(graph.get(dep, ()))
    return out, inserted


def ceiling(turns: Sequence[tuple[Sequence[str], Sequence[str]]]) -> dict[str, object]:
    graph = true_graph()
    base = best = 0.0
    share: dict[str, float] = {}
    for ranked, gold in turns:
        walked, inserted = perfect_walk(ranked, gold, graph)
        before, after = ap_at_10(ranked, gold), ap_at_10(walked, gold)
        base, best = base + before, best + after
        for tool in inserted:
            share[tool] = share.get(tool, 0.0) + (after - before) / len(inserted)
    n = len(turns) or 1
    return {
        "turns": len(turns),
        "hybrid_map@10": round(base / n, 4),
        "ceiling_map@10": round(best / n, 4),
        "gain": round((best - base) / n, 4),
        "gain_by_tool": {t: round(v / n, 4) for t, v in sorted(share.items(), key=_larger) if v > 0},
    }


def _larger(item: tuple[str, float]) -> float:
    return -item[1]


def offline_turns() -> list[tuple[list[str], list[str]]]:
    ds = load_dataset(DATASET)
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(infer_dependencies=False)
        registry = Registry.open(Path(tmp) / "r", embedder=CachedEmbedder(Embedder()), settings=settings)
        registry.ingest(ds.name, ds.tools, [])
        names = {t.id: t.name for t in registry.tools()}
        view = RecordedIndex(live=registry).view()
        queries = [q for qs in ds.query_sets.values() for q in qs]
        texts = [(clean_query(q.text),) for q in queries]
        for start in range(0, len(texts), 256):
            view.record(texts[start : start + 256])
        params = RetrievalSettings(method="hybrid")
        return [
            ([names[r.tool_id] for r in retrieve(q.text, view, registry.dependencies, params)], list(q.gold))
            for q in queries
        ]


def replay_turns(path: Path, variant: str) -> list[tuple[list[str], list[str]]]:
    doc = json.loads(path.read_text(encoding="utf-8"))
    return [(t["ranked"], t["gold"]) for t in doc["details"][variant]["turns"] if t["gold"]]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--replay", type=Path, help="a bfcl_replay.py --json --details output")
    ap.add_argument("--variant", default="cold-inferred-hybrid")
    args = ap.parse_args()
    turns = replay_turns(args.replay, args.variant) if args.replay else offline_turns()
    print(json.dumps(ceiling(turns), indent=1))


if __name__ == "__main__":
    main()
