"""Stores that hang: a `toolweave serve` replica on an `s3://` registry whose object store (moto's server,
its own process) or Redis (a real `redis-server`) is paused with SIGSTOP, so connections are accepted
and never answered. The replica keeps answering `find_tools` and calls from its in-memory snapshot
and its sessions, logs one line per outage (no traceback), and recovers by itself once the store is
resumed. A Redis that comes back empty gets every session the replica holds written back. No test
here asserts a timing: a call that hung on the store would fail its generous deadline instead.
docs/deploy.md, "Failure modes"."""

from __future__ import annotations

import os
import statistics
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from mcp import Client

from tests.meta import session_meta
from tests.redis_server import RedisServer
from tests.s3 import MotoProcess, moto_bucket
from toolweave.registry.embeddings import Embedder

from .test_replicas_e2e import REGISTRY, base_replica, called, found, poll, poll_async, serves_base, serving

pytestmark = [pytest.mark.integration, pytest.mark.anyio, pytest.mark.replicas, pytest.mark.timeout(900)]

OUTAGE_S = float(os.environ.get("TOOLWEAVE_OUTAGE_S", "15"))
"""How long each store stays paused (the issue's check is 30 s: TOOLWEAVE_OUTAGE_S=30)."""
HUNG_S = 30.0
"""A request that takes this long waited on the paused store: the test fails instead of hanging."""


@pytest.fixture
def moto() -> Iterator[MotoProcess]:
    server = MotoProcess()
    yield server
    server.stop()


@pytest.fixture
def s3(
    monkeypatch: pytest.MonkeyPatch, moto: MotoProcess, registry_lock: RedisServer
) -> Iterator[dict[str, str]]:
    yield from moto_bucket(monkeypatch, server=moto)


async def timed_find(client: Client, query: str) -> float:
    """One find_tools in a session, which must find the operation it names; how long it took."""
    started = time.monotonic()
    names = await session_found(client, query)
    assert f"base__base_op{query.split()[1]}" in names
    return time.monotonic() - started


def report(what: str, seconds: list[float]) -> None:
    ordered = sorted(seconds)
    p99 = ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]
    sys.stderr.write(
        f"{what}: {len(ordered)} find_tools, p50 {statistics.median(ordered):.3f} s, p99 {p99:.3f} s\n"
    )


async def test_a_hung_object_store_leaves_the_replica_serving_and_it_recovers_by_itself(
    s3: dict[str, str], moto: MotoProcess, tmp_path: Path, shared_embedder: Embedder
) -> None:
    replica = base_replica(tmp_path, s3)
    with serving(replica):
        await poll_async(lambda: serves_base(replica), "the replica serves its catalog")
        async with Client(replica.url, mode="legacy") as client:
            before = [await timed_find(client, f"operation {n % 6} of the base service") for n in range(20)]
            moto.pause()
            seconds: list[float] = []
            try:
                started = time.monotonic()
                n = 0
                while (
                    time.monotonic() - started < OUTAGE_S
                    or "could not check the registry" not in replica.logs()
                ):
                    # a new request each time: neither the answer nor its full-text hits are cached
                    seconds.append(
                        await timed_find(client, f"operation {n % 6} of the base service, take {n}")
                    )
                    n += 1
                    if time.monotonic() - started > OUTAGE_S + 60:
                        raise AssertionError("the replica never logged its failed poll")
                with anyio.fail_after(HUNG_S):
                    assert "paused" in await called(replica, "paused")  # calls do not touch the store
            finally:
                moto.resume()
        report("object store up", before)
        report("object store paused", seconds)

        from toolweave.records import ToolRecord
        from toolweave.registry import Registry
        from toolweave.registry.sources import SourceSpec
        from toolweave.settings import Settings

        writer = Registry.open(
            settings=Settings(home=REGISTRY, registry_storage_options=s3), embedder=shared_embedder
        )
        try:
            late = ToolRecord(
                id="late__pay_invoice", source="late", name="pay_invoice", description="Pay an invoice."
            )
            writer.ingest("late", [late])
            writer.set_source_specs([SourceSpec("late", "catalog", "{}")])
        finally:
            writer.close()

        async def late_found() -> bool:
            return "late__pay_invoice" in await found(replica, "pay the supplier's invoice")

        await poll_async(late_found, "the replica follows the registry again after the outage", 120)
        poll(
            lambda: "the registry can be checked again" in replica.logs(), "the replica logs that it is back"
        )
        logs = replica.logs()
        assert logs.count("could not check the registry for newer versions") == 1  # one line per outage
        assert logs.count("full-text search failed, vector search only") == 1
        assert "Traceback" not in logs


async def session_found(client: Client, query: str) -> list[str]:
    """``find_tools`` in a session the client names: the kind Redis keeps (an unnamed one is per process)."""
    with anyio.fail_after(HUNG_S):
        result = await client.call_tool("find_tools", {"query": query}, meta=session_meta("e2e-outage"))
    assert result.structured_content is not None, result
    return [t["name"] for t in result.structured_content.get("tools", [])]


async def test_a_hung_then_emptied_redis_leaves_sessions_serving_and_gets_them_back(
    s3: dict[str, str], registry_lock: RedisServer, tmp_path: Path
) -> None:
    """Redis serves the sessions (and the writer lock): paused, the replica keeps its sessions in memory
    and answers; restarted empty, every session the replica holds is written back within one poll."""
    replica = base_replica(tmp_path, s3, upstream=False, TOOLWEAVE_SESSION_STORE_URL=registry_lock.url)
    with serving(replica):
        await poll_async(lambda: serves_base(replica), "the replica serves its catalog")
        redis = registry_lock.client()
        async with Client(replica.url) as client:  # the 2026 era, a named session: one Redis keeps
            assert "base__base_op1" in await session_found(client, "operation 1 of the base service")
            sessions = poll(lambda: redis.keys("toolweave:session:*"), "the session is written to Redis")

            registry_lock.pause()
            seconds: list[float] = []
            try:
                started = time.monotonic()
                n = 0
                while time.monotonic() - started < OUTAGE_S:
                    t0 = time.monotonic()
                    assert f"base__base_op{n % 6}" in await session_found(
                        client, f"operation {n % 6} of the base service"
                    )
                    seconds.append(time.monotonic() - t0)
                    n += 1
            finally:
                registry_lock.resume()
            report("Redis paused", seconds)
            poll(lambda: "is reachable again" in replica.logs(), "the replica logs that Redis is back", 60)

            registry_lock.kill()  # back empty: no RDB, no AOF
            registry_lock.start()
            redis = registry_lock.client()
            assert not redis.keys("toolweave:session:*")
            back = poll(lambda: redis.keys("toolweave:session:*"), "the replica writes its session back", 30)
            assert set(back) == set(sessions)
            assert "base__base_op4" in await session_found(client, "operation 4 of the base service")
        logs = replica.logs()
        assert logs.count("is unreachable") <= 2  # one line per outage (the pause; the restart)
        assert "Traceback" not in logs
