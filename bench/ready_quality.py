"""What a starting gateway's first answers are worth: the ready table's BM25 against the datasets.

Until its registry and embedding model are up (seconds; tens of them on a busy machine), a gateway
answers ``find_tools`` from the ready table it left beside the registry (``server/turns/ready_index.py``):
BM25 over the tools' indexed texts, standard library only. This runner ranks every request of each
dataset with that index, built from the same texts the registry indexes (``tool_document``), and prints
mAP@10 and Complete@10 per query set, to set beside the gateway's own figures (bench/RESULTS.md,
"Retrieval quality": ``toolweave bench NAME --method hybrid``).

``--vectors`` also ranks each request as the table does once its query encoder is loaded
(``server/turns/ready_rank.py``): ``retrieval.pipeline.retrieve`` over the table's float16 tool vectors
and its BM25 (``--method``, default ``hybrid``, the gateway's first pass; the datasets carry no inferred
edges for ``grtf`` to walk). Tool and request vectors come from the benchmarks' disk cache
(``CachedEmbedder``: the same numbers as the gateway's query encoder,
tests/registry/test_query_encoder_onnx.py).

    .venv/bin/python bench/ready_quality.py [NAME[:QUERY_SET] ...] [--limit 3000] [--vectors]
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from toolweave.benchmark import load_dataset
from toolweave.benchmark.embedding_cache import CachedEmbedder
from toolweave.registry.documents import tool_document
from toolweave.registry.embeddings import Embedder
from toolweave.retrieval.metrics import summarize
from toolweave.server.turns.ready_index import ReadyIndex, ReadyTool
from toolweave.server.turns.ready_rank import ReadyRanker, ReadySearch, ReadyVectors
from toolweave.settings import RetrievalSettings, Settings

if TYPE_CHECKING:
    from toolweave.records import ToolRecord

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


def score(spec: str, limit: int, method: str | None = None) -> list[dict[str, object]]:
    """mAP@10 / Complete@10 of the ready table's BM25 per query set; with ``method``, of the table's
    vector ranking by that retrieval method too."""
    name, _, only = spec.partition(":")
    data = load_dataset(name)
    rows_in = [
        ReadyTool(t.name, t.name, {"description": t.description}, "", tool_document(t)) for t in data.tools
    ]
    index = ReadyIndex(rows_in)
    ranker = _ranker(data.tools, rows_in, method) if method else None
    rows: list[dict[str, object]] = []
    for set_name in [only] if only else sorted(data.query_sets):
        queries = data.query_sets[set_name][:limit]
        row: dict[str, object] = {"dataset": name, "query_set": set_name, "queries": len(queries)}
        rankings = {"": [[t.id for t, _ in index.search(q.text, 10)] for q in queries]}
        if ranker is not None:
            rankings["vectors_"] = [[t.id for t, _ in ranker.ranked(q.text, 10)] for q in queries]
        for prefix, lists in rankings.items():
            figures = summarize([(r, q.gold) for r, q in zip(lists, queries, strict=True)], ks=(10,))
            row[f"{prefix}map@10"] = round(figures["map@10"], 4)
            row[f"{prefix}complete@10"] = round(figures["complete@10"], 4)
        rows.append(row)
    return rows


def _ranker(tools: Sequence[ToolRecord], rows: list[ReadyTool], method: str) -> ReadyRanker:
    """The table's ranking once its encoder is up: float16 tool vectors of the default model, its BM25,
    ``retrieve`` with the default retrieval settings but ``method``."""
    model = Settings().embedding_model
    embedder = CachedEmbedder(Embedder(model))
    vectors = embedder.embed_documents([r.text for r in rows])
    matrix = vectors.astype("<f2").astype(np.float32)  # as the table stores them
    search = {
        "model": model,
        "dim": int(matrix.shape[1]),
        "names": [t.name for t in tools],
        "sources": [t.source for t in tools],
        "destructive": [t.name for t in tools if t.destructive],
        "edges": [],
    }
    table = ReadyIndex(rows, search)
    params = RetrievalSettings(method=method)
    return ReadyRanker(ReadySearch(table, ReadyVectors.plain(matrix), embedder), params)  # type: ignore[arg-type]


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("datasets", nargs="*", default=list(DATASETS))
    parser.add_argument("--limit", type=int, default=100_000, help="requests per query set, from the top")
    parser.add_argument("--vectors", action="store_true", help="also the table's vector ranking")
    parser.add_argument("--method", default="hybrid", help="its retrieval method (with --vectors)")
    args = parser.parse_args(argv)
    for spec in args.datasets:
        for row in score(spec, args.limit, args.method if args.vectors else None):
            print(json.dumps(row))


if __name__ == "__main__":
    main()
