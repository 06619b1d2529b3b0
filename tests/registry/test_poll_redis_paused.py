"""Redis paused, the store fine: a replica on an ``s3://`` registry (moto's server,
its own process) whose Redis writer lock (a real ``redis-server``) is stopped with SIGSTOP. A flush of
its usage examples then waits for the lock while holding the process's write lock; the registry poll
must not wait behind it (the gateway would log "could not check the registry for newer versions" about
a store that answers). Once Redis is back the flush writes, and the next poll follows the store."""

from __future__ import annotations

import threading

import pytest

from tests.redis_server import RedisServer
from tests.server.test_start_without_lock import s3 as s3  # the fixture: a moto bucket, a Redis lock
from toolweave.records import ToolRecord
from toolweave.registry import Embedder, Registry
from toolweave.registry import flusher as flusher_module
from toolweave.settings import Settings

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

HOME = "s3://registry/paused-redis"
JOIN_S = 30.0
"""A poll still running after this long waits on the paused Redis (it answers in milliseconds)."""


def tool(source: str, name: str, description: str) -> ToolRecord:
    return ToolRecord(id=f"{source}__{name}", source=source, name=name, description=description)


def test_a_poll_does_not_wait_on_a_paused_redis_that_a_flush_waits_for(
    s3: dict[str, str],
    registry_lock: RedisServer,
    shared_embedder: Embedder,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    settings = Settings(home=HOME, registry_storage_options=s3, usage_flush_s=3600.0)
    here = Registry.open(settings=settings, embedder=shared_embedder)
    other = Registry.open(settings=settings, embedder=shared_embedder)
    try:
        here.ingest("mine", [tool("mine", "get_weather", "Weather forecast for a city.")])
        assert here.record_usage("mine__get_weather", "will it rain in Lyon tomorrow")
        # another replica commits; this one has not polled since
        other.ingest("theirs", [tool("theirs", "pay_invoice", "Pay a supplier's invoice.")])
        # the flush waits for the lock until Redis is back (not its usual 10 s): the poll below then
        # runs while the flush certainly still waits
        monkeypatch.setattr(flusher_module, "FLUSH_LEASE_WAIT_S", 240.0)
        asked = threading.Event()
        lock = here._state.db.lock
        real_try_acquire = lock.try_acquire

        def try_acquire() -> bool:
            asked.set()
            return real_try_acquire()

        monkeypatch.setattr(lock, "try_acquire", try_acquire)
        flushed: list[bool] = []
        flush = threading.Thread(target=lambda: flushed.append(here.flush_observations()), daemon=True)
        polled: list[bool] = []
        registry_lock.pause()
        try:
            flush.start()
            assert asked.wait(JOIN_S), "the flush never asked Redis for the lock"
            poll = threading.Thread(target=lambda: polled.append(here.refresh()), daemon=True)
            poll.start()
            poll.join(JOIN_S)
            assert flush.is_alive(), "the flush did not wait for the paused Redis"
            assert polled == [False], "the poll waited on the paused Redis behind the flush"
        finally:
            registry_lock.resume()
        flush.join(120)
        assert flushed == [True], "the flush did not write once Redis was back"
        # the flush's write caught up with the other replica's commit (what it reads of it); the next
        # poll loads the rest
        assert here.refresh()
        assert here.find("theirs__pay_invoice") is not None
        assert not here.refresh()
    finally:
        other.close()
        here.close()
