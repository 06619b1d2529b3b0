"""Micro-batcher and find_tools cache: many concurrent turns share model runs and answers."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

import anyio
import numpy as np
import pytest

from toolweave.registry.batching import QueryBatcher
from toolweave.server.find_cache import FindCache

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
    from toolweave.server.transports import _loop_options

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
    from toolweave.server.gateway import _plain_find_tools_arguments
    from toolweave.server.handshake import FIND_TOOLS, META_INPUT_SCHEMAS
    from toolweave.server.proxy import argument_errors

    assert _plain_find_tools_arguments(arguments) is plain
    if plain:  # never skips a check that would have found a problem
        assert argument_errors(META_INPUT_SCHEMAS[FIND_TOOLS], arguments) == []
