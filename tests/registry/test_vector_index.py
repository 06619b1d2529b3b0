"""Large registries: above ``vector_index_threshold`` tools the vector first pass goes through a LanceDB
ANN index (no in-memory matrix), finds what exact search finds, sees rows ingested after the index was
built, and an index build that never got committed is rolled back.

Real LanceDB on disk; the vectors come from a deterministic fake embedder (random unit vectors per
text), since what is tested is our use of the index, not the model: a few hundred tools then cost
milliseconds to embed.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import toolweave.registry.vector_index as vector_index_module
from tests.redis_server import RedisServer
from toolweave.errors import RegistryError
from toolweave.names import NameVocabulary, text_terms
from toolweave.records import SearchScope, ToolRecord, make_tool_id
from toolweave.registry import Embedder, Registry
from toolweave.registry.database import RegistryDatabase
from toolweave.registry.fleet_fit import FleetMap
from toolweave.registry.store import CompactRecords
from toolweave.registry.vector_index import index_state
from toolweave.settings import Settings

pytestmark = pytest.mark.integration

DIM = 32
TOOLS = 300


class HashEmbedder(Embedder):
    """A random unit vector per text, seeded by the text: same text, same vector."""

    def __init__(self) -> None:
        super().__init__("hash-embedder")
        self._dim = DIM

    def embed_documents(self, texts: Sequence[str], batch_size: int = 16) -> np.ndarray:
        rows = [
            np.random.default_rng(int.from_bytes(hashlib.sha256(t.encode()).digest()[:8])).standard_normal(
                DIM
            )
            for t in texts
        ]
        matrix = np.asarray(rows, dtype=np.float32).reshape(len(texts), DIM)
        return matrix / np.linalg.norm(matrix, axis=1, keepdims=True)


def tools(source: str, n: int, start: int = 0) -> list[ToolRecord]:
    return [
        ToolRecord(id=f"{source}__t{i}", source=source, name=f"t{i}", description=f"tool {i} of {source}")
        for i in range(start, start + n)
    ]


def open_registry(path: Path, threshold: int) -> Registry:
    # usage vectors off: these tests compare the text-vector first pass alone
    settings = Settings(home=path, vector_index_threshold=threshold, infer_dependencies=False, usage_weight=0)
    return Registry.open(path, embedder=HashEmbedder(), settings=settings)


def vector_ids(reg: Registry, query: str, k: int = 10, exclude: frozenset[str] = frozenset()) -> list[str]:
    ((hits, _),) = reg.search([(query,)], k, SearchScope(exclude, text=False))
    return [h.tool_id for h in hits]


QUERIES = [f"find something about topic {n}" for n in range(20)]


@pytest.fixture
def exact(tmp_path: Path) -> Registry:
    reg = open_registry(tmp_path / "exact", threshold=10_000)
    reg.ingest("a", tools("a", TOOLS // 2))
    reg.ingest("b", tools("b", TOOLS // 2))
    return reg


@pytest.fixture
def large(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Registry:
    reg = open_registry(tmp_path / "large", threshold=100)
    # refreshed here, not in the background: a late background refresh would race the tests
    monkeypatch.setattr(reg.vector_index, "refresh_later", lambda: None)
    reg.ingest("a", tools("a", TOOLS // 2))
    reg.ingest("b", tools("b", TOOLS // 2))
    assert reg.vector_index.refresh() == "built"
    return reg


def test_above_the_threshold_search_uses_the_ann_index_and_finds_what_exact_search_finds(
    exact: Registry, large: Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[int] = []
    real = vector_index_module.ann_search

    def counted(*args: Any, **kwargs: Any) -> object:
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(vector_index_module, "ann_search", counted)
    assert large.vector_index.in_use and not exact.vector_index.in_use
    assert index_state(large._state.table).indexed == TOOLS  # the index covers every row
    for query in QUERIES:
        assert vector_ids(large, query) == vector_ids(exact, query)
        assert vector_ids(large, query, exclude=frozenset({"a"})) == vector_ids(
            exact, query, exclude=frozenset({"a"})
        )
    assert len(calls) == 2 * len(QUERIES)  # every vector search of the large registry went to the index
    # the scores are exact cosines (re-scored with the full vectors), as the relevance floor expects
    ((hits, _),) = large.search([(QUERIES[0],)], 5, SearchScope(text=False))
    ((want, _),) = exact.search([(QUERIES[0],)], 5, SearchScope(text=False))
    assert [h.score for h in hits] == pytest.approx([h.score for h in want], abs=1e-4)
    # ... and no vector is held in memory, nor decoded records (decoded on access instead)
    assert large._state.snap.matrix.size == 0
    assert isinstance(large._state.snap.records, CompactRecords)
    assert large.get("a__t3") == exact.get("a__t3")
    assert large.tools("b") == exact.tools("b")
    assert large.graph.nx_graph.nodes(data=True) == exact.graph.nx_graph.nodes(data=True)


def test_below_the_threshold_nothing_changes(exact: Registry) -> None:
    assert exact.vector_index.refresh() == "none"
    assert not index_state(exact._state.table).exists
    assert exact._state.snap.matrix.shape == (TOOLS, DIM)


def test_a_new_ingest_is_found_before_the_index_is_refreshed(large: Registry) -> None:
    new = ToolRecord(id="c__fresh", source="c", name="fresh", description="freshly added tool")
    large.ingest("c", [new])
    assert index_state(large._state.table).unindexed == 1  # the index does not cover it yet...
    # ... yet it is found: its own document is the closest text to it
    from toolweave.registry.documents import tool_document

    assert vector_ids(large, tool_document(new, with_examples=False), k=3)[0] == "c__fresh"
    assert large.vector_index.refresh() == "merged"
    assert index_state(large._state.table).unindexed == 0
    assert vector_ids(large, tool_document(new, with_examples=False), k=3)[0] == "c__fresh"


def test_the_background_refresh_indexes_an_ingest_and_commits_it(tmp_path: Path) -> None:
    reg = open_registry(tmp_path / "reg", threshold=100)
    reg.ingest("a", tools("a", 150))
    reg.close()  # waits for the background build
    db = RegistryDatabase.open(tmp_path / "reg")
    assert db.head is not None and db.head.action == "vector index built"
    assert index_state(db.tool_table()).indexed == 150


def test_an_index_build_that_is_not_committed_is_rolled_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "reg"
    reg = open_registry(path, threshold=100)
    monkeypatch.setattr(reg.vector_index, "refresh_later", lambda: None)
    reg.ingest("a", tools("a", 150))
    committed = reg._state.db.head
    assert committed is not None
    expected = {q: vector_ids(reg, q) for q in QUERIES[:5]}
    real_commit = reg._state.db.commit

    def crash(*args: Any, action: str = "", **kwargs: Any) -> object:
        if action.startswith("vector index"):
            raise RegistryError("simulated crash between the index build and its commit")
        return real_commit(*args, action=action, **kwargs)

    monkeypatch.setattr(reg._state.db, "commit", crash)
    with pytest.raises(RegistryError, match="simulated crash"):
        reg.vector_index.refresh()
    # in this process: back to the committed rows (restored as a new, committed version), no index
    head = reg._state.db.head
    assert head is not None and head.action == "recover"
    assert (
        reg._state.table.version
        == head.versions[head.tools_table]
        > committed.versions[committed.tools_table]
    )
    assert not index_state(reg._state.table).exists
    assert {q: vector_ids(reg, q) for q in QUERIES[:5]} == expected

    # a process that died the same way (index written, commit never made): the next open rolls it back
    import lancedb
    from lancedb.index import HnswSq

    from toolweave.registry.store import ToolTable

    ToolTable(lancedb.connect(str(path)), committed.tools_table, DIM).lance.create_index(
        "vector", config=HnswSq(distance_type="cosine"), replace=True
    )
    monkeypatch.undo()
    again = open_registry(path, threshold=10_000)  # no refresh at open: see the rolled-back state
    assert again._state.db.head is not None and again._state.db.head.action == "recover"
    assert not index_state(again._state.table).exists
    assert {q: vector_ids(again, q) for q in QUERIES[:5]} == expected


def test_usage_examples_lift_a_tool_through_the_ann_path_as_through_the_matrix(tmp_path: Path) -> None:
    query = "book a table for two tonight"
    tops = []
    target = ""
    for name, threshold in (("exact", 10_000), ("large", 100)):
        settings = Settings(home=tmp_path / name, vector_index_threshold=threshold, infer_dependencies=False)
        reg = Registry.open(tmp_path / name, embedder=HashEmbedder(), settings=settings)
        reg.ingest("a", tools("a", 150))
        assert reg.vector_index.in_use is (name == "large")
        # the tool whose text is farthest from the query: only its usage vector can bring it up
        target = target or vector_ids(reg, query, k=150)[-1]
        assert target not in vector_ids(reg, query, k=30)
        assert reg.record_usage(target, query) and reg.flush_observations()
        tops.append(vector_ids(reg, query, k=5))
        reg.close()
    assert tops[0][0] == tops[1][0] == target


def test_a_search_breadth_below_the_candidates_refined_is_raised_not_refused(large: Registry) -> None:
    """Lance refuses an HNSW ef below k x refine_factor: a small ``vector_index_ef`` must still search."""
    wide = vector_ids(large, QUERIES[0], k=20)
    large.settings = large.settings.model_copy(update={"vector_index_ef": 1})
    assert vector_ids(large, QUERIES[0], k=20) == wide


def test_the_index_is_of_the_configured_kind_and_a_quantised_one_is_refined(
    exact: Registry, large: Registry
) -> None:
    """The default index holds the full vectors (exact distances: no re-read of the vectors); a
    scalar-quantised one re-scores its candidates from the table. Changing the kind rebuilds the index;
    both give exact search's tools and exact cosines."""
    want = {q: exact.search([(q,)], 5, SearchScope(text=False))[0][0] for q in QUERIES[:8]}

    def same_as_exact(reg: Registry) -> None:
        for query, hits in want.items():
            ((got, _),) = reg.search([(query,)], 5, SearchScope(text=False))
            assert [h.tool_id for h in got] == [h.tool_id for h in hits]
            assert [h.score for h in got] == pytest.approx([h.score for h in hits], abs=1e-5)

    assert index_state(large._state.table).kind == "hnsw_flat" and not large._state.snap.ann_refine
    same_as_exact(large)
    large.settings = large.settings.model_copy(update={"vector_index_kind": "hnsw_sq"})
    assert large.vector_index.refresh() == "built"
    assert index_state(large._state.table).kind == "hnsw_sq" and large._state.snap.ann_refine
    same_as_exact(large)
    assert large.vector_index.refresh() == "current"
    # a handle opened on the same registry later reads the kind from the index itself
    reopened = open_registry(large.path, threshold=100)
    assert reopened._state.snap.ann_refine
    reopened.close()


def test_destructive_marks_are_read_without_decoding_every_candidate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The relevance floor asks every candidate whether it is destructive: a large registry answers
    from the stored JSON and decodes only the records that may be (confirming them)."""
    plain = tools("a", 150)
    marked = ToolRecord(
        id="a__drop",
        source="a",
        name="drop",
        description="drop every table",
        backend={"annotations": {"destructive_hint": True}},
    )
    # the same key elsewhere in the record is no mark: decoded to confirm, and False
    elsewhere = ToolRecord(
        id="a__doc", source="a", name="doc", description="x", backend={"http": {"destructive_hint": True}}
    )
    quoted = ToolRecord(id="a__quote", source="a", name="quote", description='"destructive_hint": true')
    settings = Settings(home=tmp_path, vector_index_threshold=100, infer_dependencies=False)
    reg = Registry.open(tmp_path, embedder=HashEmbedder(), settings=settings)
    monkeypatch.setattr(reg.vector_index, "refresh_later", lambda: None)
    reg.ingest("a", [*plain, marked, elsewhere, quoted])
    records = reg._state.snap.records
    assert isinstance(records, CompactRecords)
    assert reg.is_destructive("a__drop")
    assert not reg.is_destructive("a__doc") and not reg.is_destructive("a__quote")
    assert not reg.is_destructive("a__t7") and not reg.is_destructive("nope__x")
    assert set(records._decoded) == {"a__drop", "a__doc"}  # the plain tools were never decoded
    assert [reg.is_destructive(t.id) for t in plain] == [t.destructive for t in plain]
    reg.close()


def test_ann_hits_are_named_from_row_addresses_and_a_moved_table_falls_back(
    exact: Registry, large: Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The ANN search returns row addresses, named from the snapshot's map (LanceDB need not read the
    ids back); once a write moves rows (a compaction) the map is stale: ids come from the table until
    the map is read again in the background, and every answer stays exact search's."""
    used: list[bool] = []
    real = vector_index_module.ann_search

    def spy(*args: Any, rows: Any = None, **kwargs: Any) -> object:
        used.append(rows is not None)
        return real(*args, rows=rows, **kwargs)

    monkeypatch.setattr(vector_index_module, "ann_search", spy)
    want = {q: vector_ids(exact, q) for q in QUERIES[:6]}
    rows = large._state.snap.rows
    assert rows is not None and rows.version == large._state.table.version
    assert rows.ids_at(np.array([rows.addresses[0], 2**63], dtype=np.uint64)) == [rows.ids[0], None]
    assert {q: vector_ids(large, q) for q in want} == want and all(used)

    large._state.table.lance.optimize()  # compacts the two ingests' fragments: every row gets a new address
    moved = large._state.snap.rows
    assert moved is not None and moved.version != large._state.table.version
    used.clear()
    assert vector_ids(large, QUERIES[0]) == want[QUERIES[0]] and used == [False]
    deadline = time.monotonic() + 60
    while (large._state.snap.rows or moved).version != large._state.table.version:  # the background re-read
        assert time.monotonic() < deadline, "the row addresses were never read again"
        time.sleep(0.05)
    remapped = large._state.snap.rows
    assert remapped is not None and set(remapped.addresses.tolist()).isdisjoint(moved.addresses.tolist())
    used.clear()
    assert {q: vector_ids(large, q) for q in want} == want and all(used)

    # an ingest reloads the snapshot without the map (not read on the ingest's path): the first search
    # reads ids from the table and has the map read in the background
    large.ingest("c", tools("c", 3))
    assert large._state.snap.rows is None
    used.clear()
    vector_ids(large, QUERIES[1], k=3)
    assert used == [False]
    deadline = time.monotonic() + 60
    while large._state.snap.rows is None or large._state.snap.rows.version != large._state.table.version:
        assert time.monotonic() < deadline, "the row addresses were never read after the ingest"
        time.sleep(0.05)
    assert len(large._state.snap.rows.ids) == TOOLS + 3


@pytest.mark.parametrize("size", ["exact", "large"])
def test_the_name_vocabulary_counts_the_tools_own_names_on_every_path_to_a_snapshot(
    size: str, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ids are sanitised and cut (``获取天气`` → ``zh__tool``): the vocabulary counts the tools' own
    names, read decoded (``exact``) or compact (``large``: the ANN path), after an ingest, a deletion, a
    rolled-back write, another process's commit loaded by ``refresh``, and at open."""
    reg: Registry = request.getfixturevalue(size)
    threshold = reg.settings.vector_index_threshold
    follower = open_registry(Path(reg.path), threshold)
    follower.vector_index._pool.submit(lambda: None).result()  # its index check at open is over: no race
    taken: set[str] = set()
    named = []
    for name in ("获取天气", "查询股票", "list_deliveries_for_a_repository_webhook_by_organization_and_date"):
        taken.add(tool_id := make_tool_id("zh", name, taken))
        named.append(ToolRecord(id=tool_id, source="zh", name=name, description=f"{name} tool"))

    def counted_afresh(reg: Registry) -> NameVocabulary:
        every = reg.tools()
        return NameVocabulary.of([t.id for t in every], {t.id: t.name for t in every})

    try:
        reg.ingest("zh", named)
        vocab = reg.name_vocabulary()
        assert "tool" not in vocab.counts and vocab == counted_afresh(reg)
        assert vocab.match(text_terms("which tool tells the weather?"), "zh__tool") == 0.0
        assert follower.refresh() and follower.name_vocabulary() == vocab
        reopened = open_registry(Path(reg.path), threshold)
        assert reopened.name_vocabulary() == vocab
        reopened.close()

        def failing_commit(action: str, **_: object) -> None:
            raise RuntimeError("the store went away")

        monkeypatch.setattr(reg._commits, "commit", failing_commit)
        with pytest.raises(RuntimeError):
            reg.ingest("zh", [])  # reloaded without zh, then rolled back
        assert reg.name_vocabulary() == vocab
        monkeypatch.undo()
        reg.ingest("zh", [])
        assert reg.name_vocabulary() == counted_afresh(reg) == NameVocabulary.of(t.id for t in reg.tools())
        assert follower.refresh() and follower.name_vocabulary() == reg.name_vocabulary()
    finally:
        follower.close()


def test_a_long_index_build_keeps_its_right_to_write_when_its_lock_renewals_starve(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, registry_lock: RedisServer
) -> None:
    """A build whose Redis lock expired meanwhile (the renewer starved: no renewal ran for longer than
    the TTL) still commits: nobody took the lock, so its fencing check takes it back."""
    import toolweave.registry.vector_upkeep as upkeep_module
    from toolweave.registry.lock import RedisLock

    reg = open_registry(tmp_path / "reg", threshold=100)
    monkeypatch.setattr(reg.vector_index, "refresh_later", lambda: None)
    reg.ingest("a", tools("a", 150))
    lock = RedisLock(registry_lock.url, str(tmp_path / "reg"), ttl_s=5.0)
    reg._state.db.lock = lock
    build = vector_index_module.refresh

    def starved_build(*args: Any, **kwargs: Any) -> str:
        done = build(*args, **kwargs)
        lock._stop.set()  # the renewer never runs again ...
        registry_lock.client().delete(lock._key)  # ... and the lock expired
        return done

    monkeypatch.setattr(upkeep_module, "refresh", starved_build)
    assert reg.vector_index.refresh() == "built"
    assert reg._state.db.head is not None and reg._state.db.head.action == "vector index built"


def test_a_large_registrys_follower_loads_the_changed_sources_rows_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Above the threshold the snapshot holds compact records: a follower merges the changed sources'
    rows into them (a source added, one changed, one removed) and ends where a fresh open does."""
    from toolweave.registry.vector_upkeep import VectorIndexUpkeep

    # no index builds in the background: a build is a write, which would load the changes first
    monkeypatch.setattr(VectorIndexUpkeep, "refresh_later", lambda self: None)
    path = tmp_path / "reg"
    writer = open_registry(path, threshold=100)
    writer.ingest("a", tools("a", 150))
    writer.ingest("b", tools("b", 5))
    writer.ingest("d", tools("d", 2))
    follower = open_registry(path, threshold=100)
    assert follower.vector_index.in_use
    decoded = follower.get("d__t1")  # a source no commit touches: decoded once, kept across the merges
    full = follower._state.full_loads
    writer.ingest("c", tools("c", 4))
    writer.ingest("b", [ToolRecord(id="b__t0", source="b", name="t0", description="tool 0 of b, reworded")])
    writer.ingest("a", tools("a", 149))  # a__t149 removed
    assert follower.refresh()
    assert follower._state.full_loads == full
    fresh = open_registry(path, threshold=100)
    assert sorted(follower._state.snap.ids) == sorted(fresh._state.snap.ids)
    assert "a__t149" not in follower._state.snap.ids and "c__t3" in follower._state.snap.ids
    assert follower.get("b__t0").description == "tool 0 of b, reworded"
    assert dict(follower._state.snap.hashes) == dict(fresh._state.snap.hashes)
    assert follower.get("d__t1") is decoded
    assert vector_ids(follower, "tool 2 of c", 3) == vector_ids(fresh, "tool 2 of c", 3)


def test_a_long_local_index_build_holds_the_lock_against_another_handle_of_the_same_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 100k index build holds the writer lock for minutes. Another handle of the same local registry
    in the same process (a CLI ingest beside a gateway, a benchmark's second handle) must wait for it,
    not write meanwhile: its write would move the tool table under the build, whose commit would then be
    refused and the whole build rolled back. The file lock is per open file, so a second handle of the
    same process is kept out as another process is (a per-process lock such as ``lockf`` would not)."""
    import threading

    import toolweave.registry.vector_upkeep as upkeep_module

    path = tmp_path / "reg"
    builder, other = open_registry(path, threshold=100), open_registry(path, threshold=100)
    for reg in (builder, other):  # opened empty: neither builds an index at open or after an ingest
        monkeypatch.setattr(reg.vector_index, "refresh_later", lambda: None)
    builder.ingest("a", tools("a", 150))
    building, ingest_tried = threading.Event(), threading.Event()
    order: list[str] = []
    build = vector_index_module.refresh

    def long_build(*args: Any, **kwargs: Any) -> str:
        done = build(*args, **kwargs)
        building.set()
        ingest_tried.wait(30)  # the other handle's write is under way while this build holds the lock
        time.sleep(0.5)  # ... and would have written by now, had it got the lock
        order.append("build done")
        return done

    def ingest_beside() -> None:
        building.wait(30)
        ingest_tried.set()
        other.ingest("b", tools("b", 20))
        order.append("ingest committed")

    monkeypatch.setattr(upkeep_module, "refresh", long_build)
    beside = threading.Thread(target=ingest_beside)
    beside.start()
    try:
        assert builder.vector_index.refresh() == "built"
    finally:
        beside.join(60)
    assert order == ["build done", "ingest committed"]
    builder.close()
    other.close()
    db = RegistryDatabase.open(path)
    assert db.head is not None and db.head.action.startswith("ingest")  # the ingest came after the build
    state = index_state(db.tool_table())
    assert (state.indexed, state.unindexed) == (150, 20)  # the build was kept, the ingest added to it


def test_the_fleet_map_and_its_gate_act_on_the_ann_path_as_on_the_matrix(tmp_path: Path) -> None:
    query = "book a table for two tonight"
    for name, threshold in (("exact", 10_000), ("large", 100)):
        reg = open_registry(tmp_path / name, threshold)
        reg.ingest("a", tools("a", 150))
        assert reg.vector_index.in_use is (name == "large")
        plain = vector_ids(reg, query, k=5)
        target = vector_ids(reg, query, k=150)[-1]
        q = reg._state.embedder.embed_queries([query])[0]
        t = reg.fleet_map._vectors()[target]
        # W q = t - q: the map sends this request straight to the tool farthest from it
        w = np.outer(t - q, q).astype(np.float32)
        every = frozenset(t.id for t in reg.tools())
        fitted = FleetMap(w, "hash-embedder", 1, 1, 1, 0, "", 0.0, 1.0, every)
        reg._state.fleet_map = fitted
        assert vector_ids(reg, query, k=5)[0] == target
        # the request's nearest tool had no traffic: the map leaves the request alone
        reg._state.fleet_map = replace(fitted, reached=every - {plain[0]})
        assert vector_ids(reg, query, k=5) == plain
        reg.close()
