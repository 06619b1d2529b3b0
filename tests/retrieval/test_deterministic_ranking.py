"""A ranking is a function of (registry snapshot, request, context): never of the requests served before.

Real parts: a registry on disk built from API-Bank's tools with the real embedder, 200 of its requests,
ranked in two random orders, from two threads at once, and in a second process that served other
requests first. The running fleet record this replaced changed its weights after 20 turns, so the same
request ranked differently as traffic went by.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from toolweave.benchmark.datasets import load_dataset
from toolweave.registry.embeddings import Embedder
from toolweave.registry.registry import Registry
from toolweave.retrieval import retrieve_tools
from toolweave.settings import RetrievalMethod, RetrievalSettings, Settings

pytestmark = pytest.mark.timeout(600)

_RANK_ELSEWHERE = """
import json, sys
from toolweave.registry.registry import Registry
from toolweave.retrieval import retrieve_tools
from toolweave.settings import RetrievalSettings, Settings

path, method, history, queries = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), json.loads(sys.argv[4])
registry = Registry.open(path, settings=Settings(infer_dependencies=False))
params = RetrievalSettings(method=method)
for query in history:  # another process, another past
    retrieve_tools(registry, query, params)
print(json.dumps({q: [r.tool_id for r in retrieve_tools(registry, q, params)] for q in queries}))
"""


@pytest.mark.parametrize("method", ["hybrid", "grtf"])
def test_the_same_request_ranks_the_same_whatever_came_before(
    method: RetrievalMethod, tmp_path: Path, dataset_dir: Callable[[str], Path], shared_embedder: Embedder
) -> None:
    data = load_dataset(str(dataset_dir("api_bank")))
    texts = list(dict.fromkeys(q.text for queries in data.query_sets.values() for q in queries))
    assert len(texts) >= 200
    queries, history = texts[:200], texts[200:]
    path = tmp_path / "registry"
    registry = Registry.open(path, embedder=shared_embedder, settings=Settings(infer_dependencies=False))
    registry.ingest(data.name, data.tools, data.edges)
    params = RetrievalSettings(method=method)

    def rank(query: str) -> list[str]:
        return [r.tool_id for r in retrieve_tools(registry, query, params)]

    first = {q: rank(q) for q in random.Random(1).sample(queries, len(queries))}
    second = {q: rank(q) for q in random.Random(2).sample(queries, len(queries))}
    with ThreadPoolExecutor(max_workers=2) as pool:
        threaded = dict(zip(queries[::-1], pool.map(rank, queries[::-1]), strict=True))
    assert second == first and threaded == first
    registry.close()

    elsewhere = subprocess.run(
        [sys.executable, "-c", _RANK_ELSEWHERE, str(path), method, json.dumps(history), json.dumps(queries)],
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    assert json.loads(elsewhere.stdout) == first
    assert len({tuple(ranked[:3]) for ranked in first.values()}) > 20  # the requests do rank differently
