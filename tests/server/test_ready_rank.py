"""The ready table ranked with its vectors (``server/turns/ready_rank.py``): the gateway leaves the tools'
vectors and edges beside the table; once the query encoder is loaded, a starting gateway's answers rank
as its own search does, and a table of another model keeps BM25. Real registry, LanceDB, embeddings
and MCP SDK client."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import anyio
import numpy as np
import pytest
from mcp import Client

from tests.registry.test_fleet_map import QUERY, with_traffic
from toolweave.records import SearchScope
from toolweave.registry import Embedder, Registry
from toolweave.registry.documents import tool_document
from toolweave.registry.models import MINILM, TOOLRET_V2
from toolweave.server.gateway import Gateway
from toolweave.server.turns import ready_index, ready_rank
from toolweave.server.turns.starting import answer_find_tools_while_starting, write_ready_table
from toolweave.settings import Settings

from .helpers import FakeBackend, notes_tools, time_tools
from .test_provisional import UNWORDED
from .test_startup import held_opener

pytestmark = pytest.mark.anyio

TIME = "clock__get_current_time"


def backends() -> list[FakeBackend]:
    return [FakeBackend("clock", time_tools()), FakeBackend("notes", notes_tools())]


async def gateways_ranking(registry: Registry, query: str) -> list[str]:
    """A warm gateway on ``registry`` answers ``query`` (its own search) and leaves its full ready table;
    the names its answer offers, in order."""
    gateway = Gateway(registry, backends(), Settings(home=registry.path))
    async with Client(gateway.server) as client:
        with anyio.fail_after(60):
            await gateway.warmed.wait()
        found = await client.call_tool("find_tools", {"query": query})
        await anyio.to_thread.run_sync(write_ready_table, gateway)  # unless keep_ready_table did already
    assert found.structured_content is not None
    return [t["name"] for t in found.structured_content["tools"]]


async def test_the_table_carries_the_tools_vectors(registry: Registry) -> None:
    await gateways_ranking(registry, UNWORDED)
    table = ready_index.load(registry.path)
    assert table is not None and table.search_data is not None
    search = table.search_data
    assert search["model"] == registry.embedder.model_id
    ids = [t.id for t in table.tools]
    path = ready_index.vectors_path(registry.path)
    assert path is not None
    stored = np.frombuffer(path.read_bytes(), dtype="<f2").reshape(len(ids), search["dim"])
    vectors = registry.vectors()
    expected = np.stack([vectors[i] for i in ids])
    assert np.abs(stored.astype(np.float32) - expected).max() < 1e-3  # float16 of the registry's own
    assert search["sources"] == [registry.source_of(i) for i in ids]
    edges = {(e["tool"], e["depends_on"]) for e in search["edges"]}
    assert edges == {(e.tool, e.depends_on) for i in ids for e in registry.dependencies(i)}


async def test_answers_rank_as_the_gateway_once_the_encoder_is_up(registry: Registry) -> None:
    warm = await gateways_ranking(registry, UNWORDED)
    assert warm[0] == TIME or TIME in warm  # the gateway's own search finds it
    table = ready_index.load(registry.path)
    assert table is not None
    before, _ = table.answer(UNWORDED, 10)
    assert before["tools"] == []  # BM25: none of its words is in the time tool's text
    settings = Settings(home=registry.path)
    assert ready_rank.attach(str(registry.path), settings.embedding_model, settings.retrieval)
    after, ids = table.answer(UNWORDED, 10)
    names = [t["name"] for t in after["tools"]]
    assert names[0] == warm[0] and set(names) == set(warm), (names, warm)
    assert TIME in ids


async def test_a_starting_gateway_answers_with_vectors_before_its_registry_opens(registry: Registry) -> None:
    await gateways_ranking(registry, UNWORDED)
    settings = Settings(home=registry.path)
    model = ready_index.configured_model(settings)  # none chosen: the registry's own
    thread = ready_index.rank_in_background(registry.path, model, settings.retrieval)
    assert thread is not None
    thread.join(60)
    opened = threading.Event()  # the registry never opens during the request
    gateway = Gateway(held_opener(registry, opened), backends(), settings)
    answer_find_tools_while_starting(gateway)
    try:
        async with Client(gateway.server) as client:
            found = await client.call_tool("find_tools", {"query": UNWORDED})
            assert not gateway.served.ready.is_set()
            assert found.structured_content is not None
            assert TIME in [t["name"] for t in found.structured_content["tools"]]
            listed = await client.list_tools(cache_mode="bypass")
            assert TIME in [t.name for t in listed.tools]  # published, as a table answer is
    finally:
        opened.set()


async def test_a_table_of_another_model_keeps_bm25(registry: Registry) -> None:
    await gateways_ranking(registry, UNWORDED)
    path = ready_index.ready_path(registry.path)
    assert path is not None
    data = json.loads(path.read_text())
    assert data["search"]["model"] == TOOLRET_V2.name
    data["search"]["model"] = MINILM.name  # written by a gateway of another model
    path.write_text(json.dumps(data))
    settings = Settings(home=registry.path, embedding_model=TOOLRET_V2.name)  # chosen
    model = ready_index.configured_model(settings)
    assert model == TOOLRET_V2.name
    thread = ready_index.rank_in_background(registry.path, model, settings.retrieval)
    assert thread is not None
    thread.join(60)
    table = ready_index.load(registry.path)
    assert table is not None and table.ranker is None
    assert table.answer(UNWORDED, 10)[0]["tools"] == []  # BM25's answer


async def test_vectors_that_do_not_match_the_table_are_not_used(registry: Registry) -> None:
    await gateways_ranking(registry, UNWORDED)
    vectors = ready_index.vectors_path(registry.path)
    assert vectors is not None
    data = bytearray(vectors.read_bytes())
    data[0] ^= 0xFF  # another write's vectors, or a damaged file
    vectors.write_bytes(bytes(data))
    settings = Settings(home=registry.path)
    assert not ready_rank.attach(str(registry.path), settings.embedding_model, settings.retrieval)


async def test_prepared_before_the_settings_it_ranks_only_once_they_name_the_tables_model(
    registry: Registry,
) -> None:
    """``toolweave.__main__`` starts the thread before the settings are loaded: it prepares the model the
    table names, and the table ranks with it only when the settings confirm that model."""
    await gateways_ranking(registry, UNWORDED)
    thread = ready_index.rank_in_background(registry.path)  # no settings yet
    assert thread is not None
    settings = Settings(home=registry.path, embedding_model=MINILM.name)  # the settings chose another
    assert ready_index.rank_in_background(registry.path, MINILM.name, settings.retrieval) is None
    thread.join(60)
    table = ready_index.load(registry.path)
    assert table is not None and table.ranker is None
    assert table.answer(UNWORDED, 10)[0]["tools"] == []


def test_a_gateway_that_chose_no_model_serves_the_shipped_one_its_registry_was_built_with() -> None:
    assert ready_index.configured_model(Settings()) == ready_index.ANY_SHIPPED_MODEL
    assert ready_index.configured_model(Settings(embedding_model=MINILM.name)) == MINILM.name
    assert ready_rank._accepts(ready_index.ANY_SHIPPED_MODEL, MINILM.name)
    assert not ready_rank._accepts(ready_index.ANY_SHIPPED_MODEL, "BAAI/bge-small-en-v1.5")
    assert not ready_rank._accepts(TOOLRET_V2.name, MINILM.name)


async def test_a_warm_gateway_embeds_requests_without_fastembeds_model(tmp_path: Path) -> None:
    # the request encoder runs the same ONNX file as fastembed without its import (3.4 s of CPU) and
    # model load: a warm gateway takes it (the ready table's, or its own); documents still load fastembed
    embedder = Embedder(TOOLRET_V2.name)
    settings = Settings(home=tmp_path / "registry")
    registry = Registry.open(tmp_path / "registry", embedder=embedder, settings=settings)
    try:
        gateway = Gateway(registry, backends(), settings)
        async with Client(gateway.server) as client:
            with anyio.fail_after(60):
                await gateway.warmed.wait()
            found = await client.call_tool("find_tools", {"query": UNWORDED})
        assert found.structured_content is not None
        assert TIME in [t["name"] for t in found.structured_content["tools"]]
        assert embedder._query_model is None  # fastembed's request model never loaded
        assert embedder._model is not None  # the tools' documents were embedded by fastembed's
    finally:
        registry.close()


def test_the_table_carries_what_the_fleet_learned_and_ranks_as_the_adapted_registry(
    tmp_path: Path, shared_embedder: Embedder
) -> None:
    # A fleet with traffic: usage vectors on (the default weight) and a fitted request map. The table's
    # vector side then ranks as the registry's own search does, and better than without what it learned.
    reg = with_traffic(tmp_path / "r", shared_embedder)
    reg.settings = reg.settings.model_copy(update={"usage_weight": Settings().usage_weight})
    assert reg.fleet_map.refit().outcome == "fitted"
    records = reg.tools()
    files = ready_rank.search_files(reg, records)
    assert files is not None
    search, data = files
    assert search["usage"]["rows"] and search["fleet_map"]["reached"]
    rows = [
        ready_index.ReadyTool(r.id, r.name, {"name": r.name}, r.description, tool_document(r))
        for r in records
    ]
    assert ready_index.write(reg.path, rows, search, data)
    index = ready_rank.prepare(str(reg.path), reg.embedder.model_id)
    assert index is not None and index.vectors.fleet_map is not None

    vector_only = SearchScope(text=False)
    queries = [
        QUERY,
        "do I need an umbrella in Rome",
        "email carol that the meeting moved",
        "my card balance",
    ]
    for query in queries:
        ours = [h.tool_id for h in index.search([(query,)], 3, vector_only)[0][0]]
        registrys = [h.tool_id for h in reg.search([(query,)], 3, vector_only)[0][0]]
        assert ours == registrys, query

    # a gateway set to use none of it (usage_weight 0, fleet_map off) ranks the table without it
    cold = index.as_configured(0.0, False)
    learned = [h.tool_id for h in index.search([(QUERY,)], 5, vector_only)[0][0]]
    unlearned = [h.tool_id for h in cold.search([(QUERY,)], 5, vector_only)[0][0]]
    assert learned[0] == "demo__ledger_post" and unlearned[0] != "demo__ledger_post"

    # the gateway's settings reach the table's ranker (``attach``, as ``rank_in_background`` passes them)
    table = ready_index.load(reg.path)
    assert table is not None
    for learned_setting, kept in (((0.0, False), False), ((Settings().usage_weight, True), True)):
        table.ranker = None
        assert ready_rank.attach(
            str(reg.path), reg.embedder.model_id, reg.settings.retrieval, learned_setting
        )
        assert isinstance(table.ranker, ready_rank.ReadyRanker)
        vectors = table.ranker.index.vectors
        assert (vectors.fleet_map is not None, vectors.usage_rows.size > 0) == (kept, kept)
