"""The registry as one versioned LanceDB database: edges and overrides in tables, commits, rollback of
uncommitted writes, migration of `graph.json` registries, reindex beside the old table."""

from __future__ import annotations

import json
from pathlib import Path

import lancedb
import pytest

from tests.edges import edge
from tests.registry.demo import BANK, EDGES, TOOLS, committed_generation, demo_registry, tool
from toolweave.errors import RegistryError
from toolweave.records import DependencyEdge, ToolRecord
from toolweave.registry import DependencyGraph, Embedder, Registry
from toolweave.registry.database import EDGE_TABLE, RegistryDatabase
from toolweave.registry.documents import tool_document
from toolweave.registry.overrides import EdgeSelector, GraphOverrides
from toolweave.registry.store import StoredTool, ToolTable
from toolweave.retrieval import retrieve_tools

pytestmark = pytest.mark.integration


def state(reg: Registry) -> tuple[dict[str, str], set[DependencyEdge]]:
    return {t.id: t.content_hash for t in reg.tools()}, set(reg.edges())


@pytest.fixture
def reg(tmp_path: Path, shared_embedder: Embedder) -> Registry:
    return demo_registry(tmp_path / "reg", shared_embedder)


def test_edges_live_in_a_lance_table_with_every_field(reg: Registry, shared_embedder: Embedder) -> None:
    rows = lancedb.connect(str(reg.path)).open_table(EDGE_TABLE).to_arrow().to_pylist()
    assert {DependencyEdge.model_validate(r) for r in rows} == set(EDGES)
    assert not (Path(reg.path) / "graph.json").exists()
    again = Registry.open(reg.path, embedder=shared_embedder)
    assert state(again) == state(reg)
    assert again.dependencies("demo__get_stock_price")[0].confidence == 0.75


def test_overrides_stay_in_their_gateways_view_and_an_older_versions_manifest_rows_leave(
    reg: Registry, shared_embedder: Embedder
) -> None:
    """A manifest is its gateway's own: shown in its reads, never committed, so another process (and the
    fleet, once that gateway stops) walks the shared graph as it is. Manifest rows an older version
    committed are walked by nobody and leave the edge table with the next graph commit."""
    pin = edge("demo__get_weather", "demo__check_connectivity", origin="manifest", evidence="manifest:pin")
    overrides = GraphOverrides(
        pin=[pin],
        remove=[EdgeSelector("demo__get_stock_ticker", "demo__check_connectivity")],
        where={pin.key: "gw.yaml:dependencies.pin[0]"},
    )
    shared = state(reg)
    generation = committed_generation(reg.path)
    report = reg.set_overrides(overrides)
    assert (report.pinned, report.problems) == (1, [])
    assert pin in reg.edges() and not reg.dependencies("demo__get_stock_ticker")  # its own view
    assert committed_generation(reg.path) == generation  # nothing written
    again = Registry.open(reg.path, embedder=shared_embedder)
    assert state(again) == shared and again.dependencies("demo__get_stock_ticker")
    assert RegistryDatabase.open(again.path).side.load_overrides() is None

    db = RegistryDatabase.open(reg.path)  # what an older version's gateway committed
    assert db.lock.try_acquire()
    db.recover()
    db.side.save_edges([*db.side.load_edges(), pin])
    db.commit(action="add edges")
    db.lock.release()
    old = Registry.open(reg.path, embedder=shared_embedder)
    assert state(old) == shared
    old.ingest("demo", [*TOOLS, tool("send_email", "Send an email message.")], EDGES)  # a graph commit
    assert pin not in RegistryDatabase.open(reg.path).side.load_edges()
    again.close()
    old.close()


def test_an_unchanged_ingest_commits_nothing_and_a_change_commits_once(reg: Registry) -> None:
    before = committed_generation(reg.path)
    reg.ingest("demo", TOOLS, EDGES)
    assert committed_generation(reg.path) == before
    reg.ingest("demo", [*TOOLS, tool("send_email", "Send an email message.")], EDGES)
    assert committed_generation(reg.path) == before + 1


def test_writes_no_commit_names_are_rolled_back_at_open(reg: Registry, shared_embedder: Embedder) -> None:
    committed = state(reg)
    # what a process killed after its row write leaves: rows and a new FTS index, no edges, no commit
    dying = RegistryDatabase.open(reg.path)
    assert dying.lock.try_acquire()
    dying.side.save_edges([])
    db = lancedb.connect(str(reg.path))
    table = ToolTable(db, "tools", shared_embedder.dim)
    extra = tool("send_email", "Send an email message to an address.")
    vector = shared_embedder.embed_documents([tool_document(extra)])[0]
    table.upsert([StoredTool(extra, extra.content_hash, vector)], [tool_document(extra)])
    table.delete_ids(["demo__get_weather"])
    table.rebuild_text_index()
    dying.lock.release()  # what the kernel does for a process that dies

    again = Registry.open(reg.path, embedder=shared_embedder)
    assert state(again) == committed
    assert again.text_hits("weather forecast", 3)[0].tool_id == "demo__get_weather"
    summary = again.ingest("demo", [*TOOLS, extra], EDGES)
    assert (summary.added, summary.unchanged, summary.edges) == (1, 4, 2)  # redone, not "unchanged"


def test_a_write_failing_half_way_leaves_the_committed_state(
    reg: Registry, shared_embedder: Embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    committed = state(reg)

    def broken(*_args: object, **_kw: object) -> None:
        raise RegistryError("edges: object store unreachable")

    monkeypatch.setattr(reg._state.db.side, "save_edges", broken)
    changed = [tool("get_weather", "Weather forecast and air quality for a city."), *TOOLS[:3]]
    with pytest.raises(RegistryError, match="unreachable"):
        reg.ingest("demo", changed, EDGES[:1])
    assert state(reg) == committed
    monkeypatch.undo()
    assert state(Registry.open(reg.path, embedder=shared_embedder)) == committed


def write_old_registry(
    path: Path, embedder: Embedder, *, with_graph: bool, tools: list[ToolRecord] = TOOLS
) -> None:
    """A registry as toolweave wrote it before the commit record: registry.json, tools table, graph.json."""
    path.mkdir()
    (path / "registry.json").write_text(
        json.dumps(
            {"format": "toolweave-registry/1", "embedding_model": embedder.model_id, "dim": embedder.dim}
        )
    )
    table = ToolTable(lancedb.connect(str(path)), "tools", embedder.dim)
    documents = [tool_document(t) for t in tools]
    vectors = embedder.embed_documents(documents)
    table.upsert([StoredTool(t, t.content_hash, v) for t, v in zip(tools, vectors, strict=True)], documents)
    if with_graph:
        graph = DependencyGraph()
        for t in TOOLS:
            graph.add_tool(t.id, t.kind, t.source)
        assert not graph.add_edges(EDGES)
        graph.save(path)


def test_a_graph_json_registry_is_migrated_on_open(tmp_path: Path, shared_embedder: Embedder) -> None:
    write_old_registry(tmp_path / "old", shared_embedder, with_graph=True)
    reg = Registry.open(tmp_path / "old", embedder=shared_embedder)
    assert set(reg.edges()) == set(EDGES)
    assert {t.id for t in reg.tools()} == {t.id for t in TOOLS}
    assert (
        not (tmp_path / "old" / "graph.json").exists() and not (tmp_path / "old" / "registry.json").exists()
    )
    assert (
        reg.text_hits("weather forecast", 3)[0].tool_id == "demo__get_weather"
    )  # index was missing: rebuilt
    assert state(Registry.open(tmp_path / "old", embedder=shared_embedder)) == state(reg)


def test_rows_that_lost_their_graph_get_dependencies_re_inferred(
    tmp_path: Path, shared_embedder: Embedder
) -> None:
    write_old_registry(tmp_path / "old", shared_embedder, with_graph=False, tools=BANK)
    reg = Registry.open(tmp_path / "old", embedder=shared_embedder)
    inferred = [(e.tool, e.depends_on, e.origin) for e in reg.edges()]
    assert inferred == [("bank__add_alarm", "bank__get_user_token", "inferred")]
    assert state(Registry.open(tmp_path / "old", embedder=shared_embedder)) == state(reg)


def test_reindex_swaps_in_a_new_table_and_an_interrupted_one_changes_nothing(
    reg: Registry, shared_embedder: Embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    committed = state(reg)
    real_commit = RegistryDatabase.commit

    def crash(*_args: object, **_kw: object) -> None:
        raise KeyboardInterrupt  # as a SIGTERM/Ctrl-C would, after the new table is written

    monkeypatch.setattr(RegistryDatabase, "commit", crash)
    with pytest.raises(KeyboardInterrupt):
        Registry.reindex(reg.path, embedder=shared_embedder)
    monkeypatch.setattr(RegistryDatabase, "commit", real_commit)
    unfinished = lancedb.connect(str(reg.path)).list_tables().tables
    assert {"tools_g2", "usage_g2"} <= set(unfinished)  # the unfinished new tables
    again = Registry.open(reg.path, embedder=shared_embedder)
    assert state(again) == committed
    assert lancedb.connect(str(reg.path)).list_tables().tables == [
        "commit",
        "edges",
        "fleet_map",
        "overrides",
        "sources",
        "tools",
        "traffic",
        "usage",
    ]

    assert Registry.reindex(reg.path, embedder=shared_embedder) == len(TOOLS)
    assert sorted(lancedb.connect(str(reg.path)).list_tables().tables) == [
        "commit",
        "edges",
        "fleet_map",
        "overrides",
        "sources",
        "tools_g2",
        "traffic",
        "usage_g2",
    ]
    after = Registry.open(reg.path, embedder=shared_embedder)
    assert state(after) == committed
    assert retrieve_tools(after, "share price of Apple")[0].tool_id == "demo__get_stock_price"


def test_compaction_is_committed_so_reopening_rolls_nothing_back(
    reg: Registry,
    shared_embedder: Embedder,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setattr("toolweave.registry.commits._COMPACT_EVERY", 1)
    reg.ingest("demo", [*TOOLS, tool("send_email", "Send an email message.")], EDGES)
    generation = committed_generation(reg.path)
    again = Registry.open(reg.path, embedder=shared_embedder)
    assert committed_generation(again.path) == generation
    assert "rolled back" not in caplog.text
    assert state(again) == state(reg)


def test_a_registry_setting_keeps_uris_and_expands_paths() -> None:
    from toolweave.settings import Settings

    assert Settings(home="s3://bucket/team/tools").home == "s3://bucket/team/tools"
    assert Settings(home="~/reg").home == Path.home() / "reg"
    settings = Settings()
    settings.home = "s3://bucket/x"  # what --registry does
    assert settings.home == "s3://bucket/x"
