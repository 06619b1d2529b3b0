"""Many processes on one registry: the writer lease, the compare-and-set commit, followers that reload a
newer generation, and recovery only by a lease holder (docs/registry.md, "Replicas")."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

import lancedb
import pytest

from tests.redis_server import RedisServer
from toolweave.errors import ConfigError, RegistryBusyError
from toolweave.records import DependencyEdge, EdgeKind, ToolRecord
from toolweave.registry import Embedder, Registry
from toolweave.registry.database import RegistryDatabase
from toolweave.registry.lock import FileLock, RedisLock, writer_lock
from toolweave.registry.overrides import EdgeSelector, GraphOverrides
from toolweave.registry.sources import SourceSpec
from toolweave.registry.store import StoredTool

pytestmark = pytest.mark.integration

WRITER = Path(__file__).with_name("replica_writer.py")


def tool(name: str, description: str, source: str = "demo") -> ToolRecord:
    return ToolRecord(id=f"{source}__{name}", source=source, name=name, description=description)


TOOLS = [
    tool("get_stock_price", "Current share price of a company's stock, by ticker symbol."),
    tool("get_stock_ticker", "Look up the stock ticker symbol of a company by its name."),
]
EDGE = DependencyEdge(
    tool="demo__get_stock_price",
    depends_on="demo__get_stock_ticker",
    kind=EdgeKind.PARAMETER_DIRECTLY_DEPENDS_ON,
    parameter_name="ticker",
)


def tools_table(db: RegistryDatabase) -> str:
    """The committed tool table's name (the test's registry has committed one)."""
    assert db.head is not None
    return db.head.tools_table


def committed_ids(path: Path) -> Counter[str]:
    """Tool ids as the committed tool table holds them (duplicates would count twice)."""
    registry = Registry.open(path)
    table = lancedb.connect(str(path)).open_table(tools_table(registry._state.db))
    return Counter(table.to_arrow().column("id").to_pylist())


def test_the_file_lock_admits_one_holder_until_released_or_its_process_dies(tmp_path: Path) -> None:
    first, second = FileLock(tmp_path), FileLock(tmp_path)
    assert first.try_acquire()
    assert not second.try_acquire()
    with pytest.raises(RegistryBusyError, match="another process"):
        second.acquire(timeout_s=0.1)
    first.release()
    assert second.try_acquire()
    second.release()
    # a holder killed with -9 holds nothing: the kernel drops its lock with the process
    code = (
        "import pathlib, sys, time; from toolweave.registry.lock import FileLock; "
        "lock = FileLock(pathlib.Path(sys.argv[1])); assert lock.try_acquire(); "
        "print('held', flush=True); time.sleep(60)"
    )
    holder = subprocess.Popen([sys.executable, "-c", code, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        assert not first.try_acquire()
    finally:
        holder.kill()
        holder.wait(10)
        if holder.stdout is not None:
            holder.stdout.close()
    assert first.try_acquire()


def test_the_redis_lock_fences_a_holder_that_lost_it(registry_lock: RedisServer) -> None:
    first = RedisLock(registry_lock.url, "s3://bucket/reg", ttl_s=5.0)
    second = RedisLock(registry_lock.url, "s3://bucket/reg", ttl_s=5.0)
    other_registry = RedisLock(registry_lock.url, "s3://bucket/other", ttl_s=5.0)
    assert first.try_acquire() and other_registry.try_acquire()  # one lock per registry
    assert not second.try_acquire()
    first.check()
    first._stop.set()  # as if the renewer starved ...
    assert first._renewer is not None
    first._renewer.join()
    registry_lock.client().delete(first._key)  # ... until the lock expired
    first.check()  # nobody took it meanwhile: taken back, still the same token
    token = first.token
    registry_lock.client().delete(first._key)  # expired again, and this time another writer takes it
    assert second.try_acquire()
    assert second.token > token  # the fencing token only grows
    with pytest.raises(RegistryBusyError, match="fenced"):
        first.check()
    first.release()  # releasing a lost lock leaves the new holder's alone
    second.check()
    second.release()
    assert first.try_acquire()
    first.release()


def test_an_object_store_registry_without_a_lock_reads_and_says_what_to_set_for_writes(
    tmp_path: Path,
) -> None:
    lock = writer_lock("s3://bucket/reg", "", 60.0)
    with pytest.raises(ConfigError, match="registry_lock_url") as raised:
        lock.try_acquire()
    assert "\n" not in str(raised.value)


def test_a_second_handle_follows_what_the_first_commits(tmp_path: Path, shared_embedder: Embedder) -> None:
    writer = Registry.open(tmp_path / "reg", embedder=shared_embedder)
    follower = Registry.open(tmp_path / "reg", embedder=shared_embedder)
    assert not follower.refresh()  # nothing new: one small read
    writer.ingest("demo", TOOLS, [EDGE])
    writer.set_source_specs([SourceSpec("demo", "mcp", '{"command": "demo", "env": {"K": "${K}"}}')])
    assert follower.find("demo__get_stock_price") is None
    assert follower.refresh()
    assert {t.id for t in follower.tools()} == {t.id for t in TOOLS}
    assert set(follower.edges()) == {EDGE}
    assert follower.dependencies("demo__get_stock_price") == [EDGE]
    assert follower.text_hits("ticker symbol", 1)[0].tool_id == "demo__get_stock_ticker"
    assert [s.name for s in follower.source_specs()] == ["demo"]
    assert not follower.refresh()
    # the follower writes on top of the newest generation, not its stale snapshot
    follower.ingest("other", [tool("get_weather", "Weather forecast for a city.", source="other")])
    assert writer.refresh()
    assert {t.source for t in writer.tools()} == {"demo", "other"}


def test_opening_during_another_write_rolls_nothing_back(tmp_path: Path, shared_embedder: Embedder) -> None:
    writer = Registry.open(tmp_path / "reg", embedder=shared_embedder)
    writer.ingest("demo", TOOLS[:1])
    extra = TOOLS[1]
    with (
        writer._state.write_lock,
        writer._commits.writer(),
    ):  # a write in progress: rows written, nothing committed
        vector = shared_embedder.embed_documents([extra.description])[0]
        writer._state.table.upsert([StoredTool(extra, extra.content_hash, vector)], [extra.description])
        reader = Registry.open(tmp_path / "reg", embedder=shared_embedder)
        assert {t.id for t in reader.tools()} == {TOOLS[0].id}  # the committed state only
        assert writer._state.table.count() == 2  # and the writer's rows are still there
        assert not reader._state.db.lock.try_acquire()
        writer._follower.reload()
        writer._commits.commit("ingest demo", graph=True)
    assert reader.refresh()
    assert {t.id for t in reader.tools()} == {t.id for t in TOOLS}


def test_a_dead_writers_leftovers_are_rolled_back_by_the_next_writer(
    tmp_path: Path, shared_embedder: Embedder
) -> None:
    writer = Registry.open(tmp_path / "reg", embedder=shared_embedder)
    writer.ingest("demo", TOOLS[:1])
    lock = writer._state.db.lock
    assert lock.try_acquire()  # it takes the lock, writes rows, and dies before committing
    extra = TOOLS[1]
    vector = shared_embedder.embed_documents([extra.description])[0]
    writer._state.table.upsert([StoredTool(extra, extra.content_hash, vector)], [extra.description])
    lock.release()  # what the kernel does when the process dies
    survivor = Registry.open(tmp_path / "reg", embedder=shared_embedder)
    assert {t.id for t in survivor.tools()} == {TOOLS[0].id}
    assert survivor._state.table.count() == 1  # rolled back, not just hidden
    summary = survivor.ingest("demo", TOOLS)  # re-embedded and committed, never "unchanged"
    assert summary.added == 1


def test_concurrent_writer_processes_leave_one_row_per_tool_and_a_consistent_graph(tmp_path: Path) -> None:
    path = tmp_path / "reg"
    Registry.open(path).ingest("seed", [tool("seed", "A seed tool.", source="seed")])
    rounds = 3
    writers = [
        subprocess.Popen(
            [sys.executable, str(WRITER), str(path), str(rounds), *sources],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for sources in (["a", "shared"], ["b", "shared"])
    ]
    for writer in writers:
        out, err = writer.communicate(timeout=300)
        assert writer.returncode == 0, err[-3000:]
        assert out.strip() == "done"
    ids = committed_ids(path)
    assert set(ids.values()) == {1}  # no duplicate rows
    assert set(ids) == {"seed__seed"} | {f"{s}__t{n}" for s in ("a", "b", "shared") for n in range(6)}
    registry = Registry.open(path)
    for source in ("a", "b", "shared"):  # the last round's descriptions and every declared edge
        assert {t.description for t in registry.tools(source)} == {
            f"{source} tool {n} round {rounds - 1}" for n in range(6)
        }
        declared = {(e.tool, e.depends_on) for e in registry.edges() if e.origin == "declared"}
        assert {(f"{source}__t{n}", f"{source}__t0") for n in range(1, 6)} <= declared
    assert all(registry.find(e.tool) and registry.find(e.depends_on) for e in registry.edges())


def test_a_writer_whose_table_another_wrote_cannot_commit(tmp_path: Path, shared_embedder: Embedder) -> None:
    """What the lock cannot fence (a writer that lost it between its check and its write) the commit
    catches: a table whose latest version is not this writer's is never named."""
    writer = Registry.open(tmp_path / "reg", embedder=shared_embedder)
    writer.ingest("demo", TOOLS[:1])
    intruder = lancedb.connect(str(tmp_path / "reg")).open_table(tools_table(writer._state.db))
    with (
        pytest.raises(RegistryBusyError, match="written by another writer"),
        writer._state.write_lock,
        writer._commits.writer(),
    ):
        intruder.delete("id = 'demo__get_stock_price'")  # a write the lock did not see
        writer._commits.commit("add edges", graph=True)  # must be refused
    again = Registry.open(tmp_path / "reg", embedder=shared_embedder)
    assert again._state.db.head is not None and again._state.db.head.action != "add edges"
    assert {t.id for t in again.tools()} == {TOOLS[0].id}  # the intruder's delete was rolled back


def test_a_fenced_writer_rolls_back_nothing_of_the_new_holders(
    tmp_path: Path, shared_embedder: Embedder, registry_lock: RedisServer
) -> None:
    """A writer whose Redis lock another took fails at its next data write, leaves the tables to the
    new holder (whose catch-up rolls its leftovers back) and keeps serving the committed state."""
    writer = Registry.open(tmp_path / "reg", embedder=shared_embedder)
    writer.ingest("demo", TOOLS[:1])
    db = writer._state.db
    db.lock = RedisLock(registry_lock.url, str(tmp_path / "reg"), ttl_s=5.0)
    rival = RedisLock(registry_lock.url, str(tmp_path / "reg"), ttl_s=5.0)
    rivals_table = lancedb.connect(str(tmp_path / "reg")).open_table(tools_table(db))
    with (
        pytest.raises(RegistryBusyError, match="fenced"),
        writer._state.write_lock,
        writer._commits.writer(),
    ):
        registry_lock.client().delete(db.lock._key)  # it expired ...
        assert rival.try_acquire()  # ... and another writer took it and is writing
        rivals_table.delete("id = 'demo__get_stock_price'")
        writer.ingest("demo", TOOLS)  # refused: neither its catch-up's rollback nor its rows happen
    rivals_table.checkout_latest()
    assert rivals_table.count_rows() == 0  # the new holder's write in progress is intact
    assert {t.id for t in writer.tools()} == {TOOLS[0].id}  # and this one serves the committed state
    rival.release()


def follower_state(registry: Registry) -> tuple[object, ...]:
    """What a follower serves: rows, vectors, edges, walk map, usage examples and vectors, specs."""
    state = registry._state
    snap = state.snap
    order = sorted(range(len(snap.ids)), key=lambda n: snap.ids[n])
    usage = {snap.ids[r]: tuple(v.round(5)) for r, v in zip(snap.usage_rows, snap.usage_matrix, strict=True)}
    return (
        [snap.ids[n] for n in order],
        [snap.records[snap.ids[n]] for n in order],
        snap.matrix[order].round(5).tolist() if len(order) else [],
        dict(sorted(snap.hashes.items())),
        sorted(state.edges, key=lambda e: e.key),
        {k: sorted(v, key=lambda e: e.key) for k, v in sorted(state.deps.items()) if v},
        {t: [(e.query, e.origin) for e in ex] for t, ex in sorted(registry._usage.by_tool.items())},
        usage,
        state.sources,
        sorted(state.snap.names.counts.items()),
    )


def test_a_follower_loads_what_commits_changed_not_the_whole_registry(
    tmp_path: Path, shared_embedder: Embedder
) -> None:
    path = tmp_path / "reg"
    writer = Registry.open(path, embedder=shared_embedder)
    writer.ingest("demo", TOOLS, [EDGE])
    writer.ingest("other", [tool("get_weather", "Weather forecast for a city.", source="other")])
    follower = Registry.open(path, embedder=shared_embedder)
    full = follower._state.full_loads

    for n in range(3):  # usage flushes: what every replica's calls cause, once per usage_flush_s
        assert writer.record_usage("demo__get_stock_price", f"price of share {'abc'[n]}")
        assert writer.flush_observations()
    assert follower.refresh()
    changed = tool("get_stock_ticker", "Find the ticker symbol of a listed company.")
    reverse = DependencyEdge(
        tool="demo__get_stock_ticker",
        depends_on="demo__get_stock_price",
        kind=EdgeKind.TOOL_DIRECTLY_DEPENDS_ON,
    )
    writer.ingest("demo", [TOOLS[0], changed], [reverse])  # one source's rows and edges change
    writer.ingest("third", [tool("send_mail", "Send an email.", source="third")])
    writer.ingest("other", [])  # a source's tools all removed
    writer.set_source_specs([SourceSpec("demo", "mcp", '{"command": "demo"}')])
    assert follower.refresh()
    assert follower._state.full_loads == full  # every change loaded as a change
    assert follower._state.delta_loads == 2
    assert follower_state(follower) == follower_state(Registry.open(path, embedder=shared_embedder))
    assert follower.text_hits("ticker symbol listed company", 1)[0].tool_id == "demo__get_stock_ticker"
    assert follower.dependencies("demo__get_stock_ticker") == [reverse]
    assert not follower.dependencies("demo__get_stock_price")

    # a manifest's overrides are the writer's own view: nothing committed, nothing for followers
    writer.set_overrides(GraphOverrides(remove=[EdgeSelector("demo__get_stock_price", "demo__nothing")]))
    assert not follower.refresh()
    assert follower._state.full_loads == full
