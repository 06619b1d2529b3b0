"""Micro-batcher and find_tools cache: many concurrent turns share model runs and answers."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

import anyio
import numpy as np
import pytest

from tests.results import text_part
from toolweave.registry.batching import QueryBatcher
from toolweave.server.turns.find_cache import FindCache

pytestmark = pytest.mark.anyio


class SlowEmbedder:
    """Counts model runs; the first run lasts until ``hold`` returns False (the others queue meanwhile)."""

    def __init__(self) -> None:
        self.runs: list[list[str]] = []
        self.model_name = "slow"
        self.hold = lambda: False

    def embed_queries(self, texts: Sequence[str]) -> list[np.ndarray]:
        self.runs.append(list(texts))
        deadline = time.monotonic() + 30
        while len(self.runs) == 1 and self.hold() and time.monotonic() < deadline:
            time.sleep(0.005)
        return [np.full(3, float(len(t)), dtype=np.float32) for t in texts]


def test_concurrent_queries_share_model_runs() -> None:
    inner = SlowEmbedder()
    batcher = QueryBatcher(inner)
    inner.hold = lambda: len(batcher._pending) < 23  # the first run lasts until every other caller queued
    results: dict[int, list[np.ndarray]] = {}

    def worker(n: int) -> None:
        results[n] = batcher.embed_queries(["q" * (n + 1), "shared"])

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(24)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert len(results) == 24
    for n, vectors in results.items():  # every caller got its own texts' vectors, in order
        assert [float(v[0]) for v in vectors] == [n + 1.0, 6.0]
    assert len(inner.runs) == 2  # the first caller alone, then the 23 that queued meanwhile, in one run
    assert sum(len(r) for r in inner.runs) == sum(len(set(r)) for r in inner.runs)
    assert batcher.model_name == "slow"  # everything else is delegated


def test_known_queries_do_not_wait_for_a_model_run() -> None:
    class Cached(SlowEmbedder):
        def __init__(self) -> None:
            super().__init__()
            self.known = {"known": np.full(3, 7.0, dtype=np.float32)}

        def cached_queries(self, texts: Sequence[str]) -> list[np.ndarray] | None:
            if not all(t in self.known for t in texts):
                return None
            return [self.known[t] for t in texts]

    inner = Cached()
    released = threading.Event()
    inner.hold = lambda: not released.is_set()  # the first run lasts until the test releases it
    batcher = QueryBatcher(inner)
    slow = threading.Thread(target=batcher.embed_queries, args=(["new query"],))
    slow.start()
    while not inner.runs:  # the new query's model run is in progress
        time.sleep(0.001)
    answered: list[np.ndarray] = []
    fast = threading.Thread(target=lambda: answered.extend(batcher.embed_queries(["known", "known"])))
    fast.start()
    fast.join(10)  # would wait for the held run (released below only) without the cached path
    try:
        assert [float(v[0]) for v in answered] == [7.0, 7.0]
        assert inner.runs == [["new query"]]  # no model run for it
    finally:
        released.set()
        slow.join(30)


def test_errors_reach_every_waiting_caller() -> None:
    class Broken(SlowEmbedder):
        def embed_queries(self, texts: Sequence[str]) -> list[np.ndarray]:
            raise RuntimeError("model broke")

    batcher = QueryBatcher(Broken())
    with pytest.raises(RuntimeError, match="model broke"):
        batcher.embed_queries(["a"])
    with pytest.raises(RuntimeError, match="model broke"):  # the batcher is not left stuck
        batcher.embed_queries(["b"])


async def test_find_cache_coalesces_and_clears() -> None:
    cache: FindCache[str] = FindCache(2)
    computed: list[str] = []

    async def compute(key: str) -> str:
        computed.append(key)
        await anyio.sleep(0.01)
        return key.upper()

    async with anyio.create_task_group() as tg:
        for _ in range(5):
            tg.start_soon(cache.get, "a", lambda: compute("a"))
    assert computed == ["a"]  # five concurrent identical requests, one computation
    assert await cache.get("a", lambda: compute("a")) == "A" and computed == ["a"]
    await cache.get("b", lambda: compute("b"))
    await cache.get("c", lambda: compute("c"))  # over size 2: "a" is evicted (least recently used)
    await cache.get("a", lambda: compute("a"))
    assert computed == ["a", "b", "c", "a"]
    cache.clear()
    await cache.get("a", lambda: compute("a"))
    assert computed[-1] == "a" and len(computed) == 5


def test_http_transports_run_on_uvloop_when_installed() -> None:
    from toolweave.server.fronts.transports import _loop_options

    pytest.importorskip("uvloop")
    assert _loop_options() == {"use_uvloop": True}


@pytest.mark.parametrize(
    ("arguments", "plain"),
    [
        ({"query": "what time is it"}, True),
        ({"query": "x", "k": 1}, True),
        ({"query": "x", "k": 50}, True),
        ({"query": ""}, False),
        ({"query": "x", "k": 0}, False),
        ({"query": "x", "k": 51}, False),
        ({"query": "x", "k": True}, False),  # a bool is no JSON Schema integer
        ({"query": "x", "k": 2.0}, False),  # valid, but left to the schema check
        ({"query": "x", "k": "3"}, False),
        ({"query": 5}, False),
        ({"query": "x", "extra": 1}, False),
        ({"k": 3}, False),
        ({}, False),
    ],
)
def test_find_tools_skips_the_schema_check_only_for_valid_arguments(
    arguments: dict[str, object], plain: bool
) -> None:
    from toolweave.server.calls.proxy import argument_errors
    from toolweave.server.fronts.handshake import FIND_TOOLS, META_INPUT_SCHEMAS
    from toolweave.server.turns.meta_tools import plain_find_tools_arguments

    assert plain_find_tools_arguments(arguments) is plain
    if plain:  # never skips a check that would have found a problem
        assert argument_errors(META_INPUT_SCHEMAS[FIND_TOOLS], arguments) == []


def test_find_tools_text_is_exactly_the_json_of_its_document() -> None:
    import json

    from tests.server.helpers import notes_tools, time_tools
    from toolweave.retrieval.results import RankedTool
    from toolweave.server.turns.meta_tools import FoundTool, find_tools_result

    records = [*time_tools(), *notes_tools()]
    odd = records[0].model_copy(
        update={"description": 'Zeit « jetzt » – "quoted" \\ \u2028 ok', "input_schema": {"type": "object"}}
    )
    found = [
        FoundTool(records[0], RankedTool(records[0].id, 1, "first_pass", 0.51234)),
        FoundTool(records[2], RankedTool(records[2].id, 2, "dependency", 0.0, via=records[0].id, depth=1)),
        FoundTool(records[1], RankedTool(records[1].id, 3, "first_pass", -0.25, publish=False)),
    ]
    cases = [
        ("what time is it", found, True, [records[0].id]),
        ('ünïcödé "query" \n with\ttabs', found[1:], False, []),
        ("no match", [], False, []),
        ("x" * 500, found[:1], True, [r.id for r in records]),
        ("changed tool", [FoundTool(odd, found[0].ranked)], False, []),  # same id, new record
        ("what time is it", found, True, [records[0].id]),  # again, from the cache
    ]
    cases.append(("changed tool", [FoundTool(odd, found[0].ranked)], False, [odd.id]))  # published now
    for query, tools, changed, published in cases:
        for detail in (False, True):
            result = find_tools_result(
                query, tools, list_changed=changed, published=published, name_of=str.upper, detail=detail
            )
            wanted = json.dumps(result.structured_content, ensure_ascii=False, separators=(",", ":"))
            assert text_part(result) == wanted


def test_an_embedder_shares_its_query_runs_once_asked() -> None:
    """``Embedder.share_query_runs`` (what the gateway asks of its registry's embedder) puts its query
    runs behind one ``QueryBatcher``; the vectors are the embedder's own, known queries skip the queue."""
    from toolweave.registry.embeddings import Embedder
    from toolweave.settings import MINILM_MODEL

    class Counting(Embedder):  # a subclass's embed_documents also embeds its queries (no model here)
        def __init__(self) -> None:
            super().__init__(MINILM_MODEL)  # requests and tools share its model
            self.documents: list[list[str]] = []

        def embed_documents(self, texts: Sequence[str], batch_size: int = 16) -> np.ndarray:
            self.documents.append(list(texts))
            return np.array([[float(len(t)), 1.0] for t in texts], dtype=np.float32)

    plain, shared = Counting(), Counting()
    shared.share_query_runs()
    batcher = shared._batcher
    shared.share_query_runs()
    assert batcher is not None and shared._batcher is batcher  # asked twice: still one batcher
    texts = ["what time is it", "in Tokyo", "what time is it"]
    vectors = shared.embed_queries(texts)
    assert [v.tolist() for v in vectors] == [v.tolist() for v in plain.embed_queries(texts)]
    assert batcher.runs == 1 and shared.documents == [["what time is it", "in Tokyo"]]
    assert shared.embed_query("in Tokyo").tolist() == vectors[1].tolist()
    assert batcher.runs == 1 and len(shared.documents) == 1  # known: answered from the cache
    assert plain._batcher is None
