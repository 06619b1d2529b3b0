"""Many processes on one registry: the writer lease, the compare-and-set commit, followers that reload a
newer generation, and recovery only by a lease holder (docs/registry.md, "Replicas")."""

from __future__ import annotations

import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import lancedb
import pytest

from toolweave.errors import RegistryBusyError
from toolweave.records import DependencyEdge, EdgeKind, ToolRecord
from toolweave.registry import Embedder, Registry
from toolweave.registry.lease import WriterLease
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


def committed_ids(path: Path) -> Counter[str]:
    """Tool ids as the committed tool table holds them (duplicates would count twice)."""
    registry = Registry.open(path)
    table = lancedb.connect(str(path)).open_table(registry._state.db.head.tools_table)  # type: ignore[union-attr]
    return Counter(table.to_arrow().column("id").to_pylist())


def test_the_lease_admits_one_holder_until_it_is_released_or_expires(tmp_path: Path) -> None:
    db = lancedb.connect(str(tmp_path))
    first, second = WriterLease(db, ttl_s=5.0), WriterLease(db, ttl_s=5.0)
    assert first.try_acquire()
    assert not second.try_acquire()
    holder, expires_at = second.state()  # what the lease row says now
    assert holder == first.holder and expires_at > time.time()
    with pytest.raises(RegistryBusyError, match="another process"):
        second.acquire(timeout_s=0.1)
    first.release()
    assert second.try_acquire()
    second._set(f"holder = '{second.holder}'", second.holder, time.time() - 1)  # as if it died long ago
    assert first.try_acquire()  # expired: taken over


def test_a_lease_extended_for_a_long_write_outlives_its_ttl_and_only_its_holder_extends_it(
    tmp_path: Path,
) -> None:
    db = lancedb.connect(str(tmp_path))
    holder, rival = WriterLease(db, ttl_s=5.0), WriterLease(db, ttl_s=5.0)
    assert holder.try_acquire()
    holder.extend(600)  # an index build: renewals wait behind it
    assert holder.state()[1] > time.time() + 500
    holder._set(f"holder = '{holder.holder}'", "", 0.0)  # as if it had expired and been taken
    assert rival.try_acquire()
    with pytest.raises(RegistryBusyError, match="lost"):
        holder.extend(600)
    assert holder.lost and rival.state()[0] == rival.holder


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
        with pytest.raises(RegistryBusyError):
            reader._state.db.lease.acquire(timeout_s=0.1)
        writer._follower.reload()
        writer._commits.commit("ingest demo", graph=True)
    assert reader.refresh()
    assert {t.id for t in reader.tools()} == {t.id for t in TOOLS}


def test_a_dead_writers_leftovers_are_rolled_back_once_its_lease_expires(
    tmp_path: Path, shared_embedder: Embedder
) -> None:
    writer = Registry.open(tmp_path / "reg", embedder=shared_embedder)
    writer.ingest("demo", TOOLS[:1])
    assert writer._state.db.lease.try_acquire()  # it takes the lease, writes rows, and dies before committing
    extra = TOOLS[1]
    vector = shared_embedder.embed_documents([extra.description])[0]
    writer._state.table.upsert([StoredTool(extra, extra.content_hash, vector)], [extra.description])
    lease = writer._state.db.lease
    lease._set(f"holder = '{lease.holder}'", lease.holder, time.time() - 1)  # ... long ago
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


def test_a_writer_that_lost_its_lease_cannot_commit(tmp_path: Path, shared_embedder: Embedder) -> None:
    writer = Registry.open(tmp_path / "reg", embedder=shared_embedder)
    writer.ingest("demo", TOOLS[:1])
    lease = writer._state.db.lease
    rival = WriterLease(lancedb.connect(str(tmp_path / "reg")), ttl_s=30)
    with (
        pytest.raises(RegistryBusyError, match="lease was lost"),
        writer._state.write_lock,
        writer._commits.writer(),
    ):
        lease._set(f"holder = '{lease.holder}'", lease.holder, time.time() - 1)  # it overran its TTL
        assert rival.try_acquire()
        writer.add_edges([])  # a nested write: it commits, and must be refused
    rival.release()
    again = Registry.open(tmp_path / "reg", embedder=shared_embedder)
    assert again._state.db.head is not None and again._state.db.head.action != "add edges"
    assert {t.id for t in again.tools()} == {TOOLS[0].id}
