"""The Redis writer lease against a real ``redis-server``: a request the client gave up on never lands
later, a holder killed with -9 frees the registry within its lease, and a waiting writer says what it
waits for (docs/registry.md, "Writers"). Writes hold the lock for what they write: an ingest embeds
before it, writes in chunks, and a flush loads and compacts under it only what it writes."""

from __future__ import annotations

import logging
import subprocess
import sys
import threading
from typing import Any

import pytest

from tests.redis_server import RedisServer
from tests.registry.demo import stored_examples
from toolweave.errors import RegistryBusyError
from toolweave.records import DependencyEdge, EdgeKind, ToolRecord
from toolweave.registry import Embedder, Registry
from toolweave.registry.lock import FileLock, RedisLock
from toolweave.settings import Settings

pytestmark = pytest.mark.integration

LOCATION = "s3://bucket/reg"


def lease_s() -> float:
    return Settings().registry_lock_ttl_s


def test_a_lock_request_sent_to_a_paused_redis_does_not_land_when_it_resumes(
    registry_lock: RedisServer,
) -> None:
    first = RedisLock(registry_lock.url, LOCATION, ttl_s=lease_s())
    first._client.ping()  # connected and authenticated: the next command goes straight to Redis
    registry_lock.pause()
    try:
        assert not first.try_acquire()  # timed out: Redis answers nothing
        assert "failed" in first._busy()
    finally:
        registry_lock.resume()
    client = registry_lock.client()
    client.ping()  # Redis has run whatever was queued in its sockets by now
    assert client.get(first._key) is None, "a request the client gave up on set the lock"
    second = RedisLock(registry_lock.url, LOCATION, ttl_s=lease_s())
    assert second.try_acquire()
    second.release()


def test_a_redis_paused_between_reading_its_clock_and_the_acquire_sets_no_lock(
    registry_lock: RedisServer,
) -> None:
    """The acquire itself reaches Redis and waits there: its deadline, in Redis's clock, has passed when
    Redis runs it, so it changes nothing."""
    first = RedisLock(registry_lock.url, LOCATION, ttl_s=lease_s())
    real_time = first._client.time

    def time_then_pause() -> Any:
        answer = real_time()
        registry_lock.pause()  # the next command (the acquire script) is queued in a stopped Redis
        return answer

    first._client.time = time_then_pause
    try:
        assert not first.try_acquire()
    finally:
        registry_lock.resume()
    client = registry_lock.client()
    client.ping()
    assert client.get(first._key) is None, "an acquire the client gave up on took the lock later"
    assert client.get(first._fence) is None  # not even a token was spent
    second = RedisLock(registry_lock.url, LOCATION, ttl_s=lease_s())
    assert second.try_acquire()
    second.release()


def test_a_holder_killed_with_minus_9_frees_the_lock_within_its_lease(registry_lock: RedisServer) -> None:
    code = (
        "import sys, time; from toolweave.registry.lock import RedisLock; "
        "lock = RedisLock(sys.argv[1], sys.argv[2], float(sys.argv[3])); assert lock.try_acquire(); "
        "print('held', flush=True); time.sleep(600)"
    )
    holder = subprocess.Popen(
        [sys.executable, "-c", code, registry_lock.url, LOCATION, str(lease_s())],
        stdout=subprocess.PIPE,
        text=True,
    )
    waiter = RedisLock(registry_lock.url, LOCATION, ttl_s=lease_s())
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        assert not waiter.try_acquire()
        remaining_ms = registry_lock.client().pttl(waiter._key)
        assert 0 < remaining_ms <= lease_s() * 1000  # a lease of seconds, not a minute
    finally:
        holder.kill()
        holder.wait(10)
        if holder.stdout is not None:
            holder.stdout.close()
    # the lease is a few seconds and nobody renews it now: the next writer gets it within 10 s (the
    # issue's bound); with the old 60 s TTL this raised
    waiter.acquire(timeout_s=10)
    assert waiter.token > 1
    waiter.release()


def test_a_writer_waiting_for_the_lock_says_what_it_waits_for(
    registry_lock: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    holder = RedisLock(registry_lock.url, LOCATION, ttl_s=lease_s())
    waiter = RedisLock(registry_lock.url, LOCATION, ttl_s=lease_s())
    assert holder.try_acquire()
    try:
        with (
            caplog.at_level(logging.WARNING, logger="toolweave.registry.lock"),
            pytest.raises(RegistryBusyError, match="held by pid"),
        ):
            waiter.acquire(timeout_s=6.5)
    finally:
        holder.release()
    said = [r.getMessage() for r in caplog.records]
    waiting = [m for m in said if "waiting for the registry writer lock" in m]
    assert len(waiting) == 1, waiting
    assert holder.who in waiting[0]
    assert "s3cret" not in caplog.text  # the Redis password never reaches a log line


def test_a_writer_waiting_for_a_local_registry_says_which_process_holds_it(
    tmp_path: Any, caplog: pytest.LogCaptureFixture
) -> None:
    holder, waiter = FileLock(tmp_path), FileLock(tmp_path)
    assert holder.try_acquire()
    try:
        with (
            caplog.at_level(logging.WARNING, logger="toolweave.registry.lock"),
            pytest.raises(RegistryBusyError, match="held by pid"),
        ):
            waiter.acquire(timeout_s=6)
    finally:
        holder.release()
    assert "waiting for the registry writer lock" in caplog.text


def test_an_ingest_embeds_before_it_takes_the_writer_lock(
    tmp_path: Any, shared_embedder: Embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another writer (a replica's flush) can take the lock while an ingest embeds: the ingest holds it
    only to write and commit. With the embedding under the lock, every probe here found it held."""
    registry = Registry.open(tmp_path, embedder=shared_embedder)
    probe = FileLock(tmp_path)  # another handle: a second writer of the same registry
    free_while_embedding: list[bool] = []
    real_embed = registry._ingest._embed

    def embed(documents: list[str], progress: Any) -> Any:
        free = probe.try_acquire()
        if free:
            probe.release()
        free_while_embedding.append(free)
        return real_embed(documents, progress)

    monkeypatch.setattr(registry._ingest, "_embed", embed)
    tools = [
        ToolRecord(id=f"bulk__op_{i}", source="bulk", name=f"op_{i}", description=f"Operation number {i}.")
        for i in range(40)
    ]
    summary = registry.ingest("bulk", tools)
    assert summary.embedded == 40
    assert free_while_embedding == [True]
    # and what it wrote is the registry, for another handle too
    assert len(Registry.open(tmp_path, embedder=shared_embedder)) == 40
    registry.close()


def test_a_poll_does_not_wait_behind_a_write_of_its_own_process(
    tmp_path: Any, shared_embedder: Embedder
) -> None:
    """A flush waiting for the writer lock (Redis down) holds the registry's write lock: the follower's
    poll returns at once instead of waiting behind it (and reporting the store as unreachable); the
    write catches up itself, and the next poll loads what it finds."""
    here = Registry.open(tmp_path, embedder=shared_embedder)
    other = Registry.open(tmp_path, embedder=shared_embedder)
    other.ingest("theirs", [ToolRecord(id="theirs__t", source="theirs", name="t", description="A tool.")])
    writing = threading.Event()
    done = threading.Event()

    def a_write_waiting_for_the_lock() -> None:
        with here._state.write_lock:
            writing.set()
            done.wait(30)

    writer = threading.Thread(target=a_write_waiting_for_the_lock)
    writer.start()
    try:
        assert writing.wait(10)
        polled: list[bool] = []
        poll = threading.Thread(target=lambda: polled.append(here.refresh()))
        poll.start()
        poll.join(10)
        assert polled == [False], "the poll waited behind this process's write"
    finally:
        done.set()
        writer.join()
    assert here.refresh() and here.find("theirs__t") is not None
    here.close()
    other.close()


@pytest.mark.parametrize("flush_before_the_last_write", [False, True])
def test_a_large_ingest_writes_in_chunks_and_another_writer_commits_between_them(
    tmp_path: Any,
    shared_embedder: Embedder,
    dataset_dir: Any,
    monkeypatch: pytest.MonkeyPatch,
    flush_before_the_last_write: bool,
) -> None:
    """A large ingest holds the writer lock for one chunk's write at a time: another writer (a
    replica's flush) takes it and commits between two chunks, and the graph the last write commits is
    made (inference included) before the lock is taken; the registry ends with every tool, the other
    writer's examples and the same edges as one write makes. A flush that commits while the last
    write's inference runs changes nothing inference reads: its edges are merged under the lock, not
    inferred again there."""
    from tests.registry.demo import stored_examples
    from toolweave.registry import ingest as ingest_module
    from toolweave.registry.catalog import load_catalog

    catalog = load_catalog([dataset_dir("api_bank")], "api_bank", require_description=False)
    tools = catalog.tools[:45]
    whole = Registry.open(tmp_path / "whole", embedder=shared_embedder)
    whole.ingest("api_bank", tools)  # one write (45 tools < WRITE_CHUNK)
    expected = set(whole.edges())
    assert expected and whole._state.loaded_generation == 1
    whole.close()

    monkeypatch.setattr(ingest_module, "WRITE_CHUNK", 10)
    path = tmp_path / "chunked"
    registry = Registry.open(path, embedder=shared_embedder)
    registry.ingest("other", [ToolRecord(id="other__t", source="other", name="t", description="A tool.")])
    other = Registry.open(path, embedder=shared_embedder)  # another writer of the same registry
    probe = FileLock(path)
    free_while_inferring: list[bool] = []
    from toolweave.registry.inferred_edges import infer_for as real_infer_for

    def infer_for(*args: Any, **kwargs: Any) -> Any:
        free = probe.try_acquire()
        if free:
            probe.release()
        free_while_inferring.append(free)
        return real_infer_for(*args, **kwargs)

    monkeypatch.setattr(ingest_module, "infer_for", infer_for)
    writes: list[int] = []
    real_write = registry._ingest._write

    def write(*args: Any, **kwargs: Any) -> Any:
        # between two chunks of the ingest (and before the last write): the other writer's flush commits
        if 0 < len(writes) < (6 if flush_before_the_last_write else 5):
            word = ("alpha", "bravo", "charlie", "delta", "echo")[len(writes) - 1]
            assert other.record_usage("other__t", f"use the tool on the {word} records")
            assert other.flush_observations()
        writes.append(registry._state.loaded_generation)
        return real_write(*args, **kwargs)

    monkeypatch.setattr(registry._ingest, "_write", write)
    inferred_under_the_lock: list[bool] = []
    real_infer = registry._ingest._infer

    def infer(*args: Any, **kwargs: Any) -> None:
        inferred_under_the_lock.append(kwargs.get("inferred") is None)
        real_infer(*args, **kwargs)

    registry._ingest._infer = infer  # type: ignore[method-assign]
    summary = registry.ingest("api_bank", tools)
    assert summary.added == summary.embedded == 45
    assert len(writes) == 6  # five chunks of 10 or fewer, then the removals, edges and inference
    assert free_while_inferring == [True]
    fresh = Registry.open(path, embedder=shared_embedder)
    assert len(fresh.tools("api_bank")) == 45
    assert {e for e in fresh.edges() if e.tool != "other__t"} == expected
    assert len(stored_examples(path, "other__t")) == (5 if flush_before_the_last_write else 4)
    # the graph made before the lock, or (a flush came between) its inferred edges merged under it
    assert inferred_under_the_lock == ([False] if flush_before_the_last_write else [])
    for handle in (registry, other, fresh):
        handle.close()


def _demo_tools() -> tuple[list[ToolRecord], DependencyEdge]:
    price = ToolRecord(
        id="demo__get_stock_price",
        source="demo",
        name="get_stock_price",
        description="Current share price of a company's stock, by ticker symbol.",
    )
    ticker = ToolRecord(
        id="demo__get_stock_ticker",
        source="demo",
        name="get_stock_ticker",
        description="Look up the stock ticker symbol of a company by its name.",
    )
    edge = DependencyEdge(
        tool=price.id,
        depends_on=ticker.id,
        kind=EdgeKind.PARAMETER_DIRECTLY_DEPENDS_ON,
        parameter_name="ticker",
    )
    return [price, ticker], edge


def test_a_flush_reads_none_of_another_writers_rows_or_edges_under_the_lock(
    tmp_path: Any, shared_embedder: Embedder
) -> None:
    """A usage flush after another writer's commit (a long ingest's 2,000-tool chunk) loads under the
    writer lock only what its write reads (the examples); the other source's rows and edges are left to
    the next poll, so neither this flush nor the other replicas' flushes behind it wait for them."""
    path = tmp_path / "reg"
    here = Registry.open(path, embedder=shared_embedder)
    here.ingest(
        "mine",
        [ToolRecord(id="mine__get_weather", source="mine", name="get_weather", description="Weather.")],
    )
    other = Registry.open(path, embedder=shared_embedder)
    tools, edge = _demo_tools()
    other.ingest("demo", tools, [edge])
    lock = here._state.db.lock
    loads: list[tuple[str, bool]] = []

    def holding() -> bool:
        try:
            lock.check()
        except RegistryBusyError:
            return False
        return True

    for kind in ("tools", "edges"):
        real = here._follower.appliers[kind]

        def spy(keys: list[str] | None, real: Any = real, kind: str = kind) -> None:
            loads.append((kind, holding()))
            real(keys)

        here._follower.appliers[kind] = spy
    assert here.record_usage("mine__get_weather", "will it rain in Lyon tomorrow")
    assert here.flush_observations()
    assert loads == [], "the flush read the other writer's rows or edges under the writer lock"
    assert stored_examples(path, "mine__get_weather") == ["will it rain in Lyon tomorrow"]
    assert here.refresh()  # the poll loads them, without the lock
    assert loads == [("tools", False), ("edges", False)]
    assert here.find(edge.tool) is not None and here.dependencies(edge.tool) == [edge]
    assert not here.refresh()
    here.close()
    other.close()


def test_a_flush_writes_no_example_for_a_tool_another_writer_removed(
    tmp_path: Any, shared_embedder: Embedder
) -> None:
    """The rows of the flushed tools' own sources are loaded before the write (not left for later): a
    call of a tool another writer removed meanwhile leaves no example behind."""
    path = tmp_path / "reg"
    here = Registry.open(path, embedder=shared_embedder)
    tools, _ = _demo_tools()
    here.ingest("demo", tools)
    assert here.record_usage(tools[0].id, "share price of the fruit company")
    Registry.open(path, embedder=shared_embedder).ingest("demo", tools[1:])  # the other removes it
    assert not here.flush_observations()  # nothing to write: the tool is gone
    assert stored_examples(path, tools[0].id) == []
    assert here.find(tools[0].id) is None
    here.close()


def test_a_usage_flush_does_not_compact_the_tool_table(
    tmp_path: Any, shared_embedder: Embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Compaction merges the versions of the tables this process writes: a usage flush compacting the
    tool table (an ingest's, seconds at 10k tools) held the writer lock for every other replica."""
    path = tmp_path / "reg"
    here = Registry.open(path, embedder=shared_embedder)
    tools, _ = _demo_tools()
    here.ingest("demo", tools[:1])
    here.ingest("demo", tools)  # two writes of the tool table: something to compact
    monkeypatch.setattr("toolweave.registry.commits._COMPACT_EVERY", 1)
    version = here._state.table.version
    assert here.record_usage(tools[0].id, "share price of the fruit company")
    assert here.flush_observations()
    assert here._state.table.version == version
    here.close()
