"""What a starting gateway's first answers are worth: the ready table's BM25 against the datasets.

Until its registry and embedding model are up (seconds; tens of them on a busy machine), a gateway
answers ``find_tools`` from the ready table it left beside the registry (``server/turns/ready_index.py``):
BM25 over the tools' indexed texts, standard library only. This runner ranks every request of each
dataset with that index, built from the same texts the registry indexes (``tool_document``), and prints
mAP@10 and Complete@10 per query set, to set beside the gateway's own figures (bench/RESULTS.md,
"Retrieval quality": ``toolweave bench NAME --method hybrid``).

    .venv/bin/python bench/ready_quality.py [NAME[:QUERY_SET] ...] [--limit 3000]
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence

from toolweave.benchmark import load_dataset
from toolweave.registry.documents import tool_document
from toolweave.retrieval.metrics import summarize
from toolweave.server.turns.ready_index import ReadyIndex, ReadyTool

DATASETS = (
    "api_bank",
    "toolalpaca",
    "bfcl_multiple",
    "nestful",
    "openapi_links",
    "bfcl_multi_turn",
    "seal_tools",
    "toollinkos",
    "metatool",
)


def score(spec: str, limit: int) -> list[dict[str, object]]:
    name, _, only = spec.partition(":")
    data = load_dataset(name)
    index = ReadyIndex([ReadyTool(t.name, t.name, {}, "", tool_document(t)) for t in data.tools])
    rows: list[dict[str, object]] = []
    for set_name in [only] if only else sorted(data.query_sets):
        queries = data.query_sets[set_name][:limit]
        lists = [[t.id for t, _ in index.search(q.text, 10)] for q in queries]
        figures = summarize([(r, q.gold) for r, q in zip(lists, queries, strict=True)], ks=(10,))
        rows.append(
            {
                "dataset": name,
                "query_set": set_name,
                "queries": len(queries),
                "map@10": round(figures["map@10"], 4),
                "complete@10": round(figures["complete@10"], 4),
            }
        )
    return rows


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("datasets", nargs="*", default=list(DATASETS))
    parser.add_argument("--limit", type=int, default=100_000, help="requests per query set, from the top")
    args = parser.parse_args(argv)
    for spec in args.datasets:
        for row in score(spec, args.limit):
            print(json.dumps(row))


if __name__ == "__main__":
    main()
