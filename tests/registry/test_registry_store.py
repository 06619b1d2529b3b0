"""The registry on disk, with the real embedder and a real LanceDB table."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.registry.demo import BANK, EDGES, demo_registry, tool
from tests.registry.demo import TOOLS as DEMO_TOOLS
from toolweave.errors import GraphError, ModelMismatchError, NotARegistryError, RegistryError, ToolNotFound
from toolweave.records import DependencyEdge, EdgeKind
from toolweave.registry import Embedder, Registry
from toolweave.registry.models import TOOL_ADAPTER, TOOLRET_V2
from toolweave.registry.overrides import EdgeSelector, GraphOverrides
from toolweave.retrieval import retrieve_tools
from toolweave.settings import MINILM_MODEL, RetrievalSettings, Settings

pytestmark = pytest.mark.integration


TOOLS = [*DEMO_TOOLS, tool("send_email", "Send an email message to an address.")]


@pytest.fixture
def reg(tmp_path: Path, shared_embedder: Embedder) -> Registry:
    return demo_registry(tmp_path / "reg", shared_embedder, TOOLS)


def test_retrieves_the_tool_and_what_it_depends_on(reg: Registry) -> None:
    ranked = retrieve_tools(
        reg, "What is Apple's share price right now?", RetrievalSettings(top_k=1, final_k=5)
    )
    assert [r.tool_id for r in ranked][:3] == [
        "demo__get_stock_price",
        "demo__get_stock_ticker",
        "demo__check_connectivity",
    ]
    assert ranked[1].reason == "dependency" and ranked[1].parameter_name == "ticker"
    bm25 = retrieve_tools(reg, "weather forecast city", RetrievalSettings(method="bm25", final_k=2))
    assert bm25[0].tool_id == "demo__get_weather"


def test_query_syntax_in_user_text_is_just_words(reg: Registry) -> None:
    bm25 = RetrievalSettings(method="bm25")
    for text in ['the "weather" in Paris', 'weather: city AND (forecast "unclosed']:
        assert (
            retrieve_tools(reg, text, bm25)[0].tool_id == "demo__get_weather"
        )  # no phrase/field query error
    assert retrieve_tools(reg, "it's 5 o'clock ~ * ?", bm25) == []  # no word in common: nothing, and no error


def test_conversation_context_steers_an_ambiguous_follow_up(reg: Registry) -> None:
    vector = RetrievalSettings(method="vector", final_k=3)
    stocks = retrieve_tools(reg, "and for Apple?", vector, context=["What is Tesla's share price?"])
    weather = retrieve_tools(reg, "and for Apple?", vector, context=["Will it rain in Paris tomorrow?"])
    assert stocks[0].tool_id == "demo__get_stock_price"
    assert weather[0].tool_id == "demo__get_weather"


def test_reopening_reads_tools_vectors_and_graph_from_disk(reg: Registry, shared_embedder: Embedder) -> None:
    again = Registry.open(reg.path, embedder=shared_embedder)
    assert {t.id for t in again.tools()} == {t.id for t in TOOLS}
    assert again.get("demo__check_connectivity").kind == "core"
    assert len(list(again.graph.edges())) == 2
    assert (
        retrieve_tools(again, "send a message by e-mail", RetrievalSettings(method="vector"))[0].tool_id
        == "demo__send_email"
    )


def test_unchanged_tools_are_not_embedded_again(reg: Registry) -> None:
    summary = reg.ingest("demo", TOOLS, EDGES)
    assert (summary.added, summary.updated, summary.unchanged, summary.embedded) == (0, 0, 5, 0)
    changed = [*TOOLS[:4], tool("send_email", "Send an e-mail with attachments.")]
    summary = reg.ingest("demo", changed, EDGES)
    assert (summary.updated, summary.unchanged, summary.embedded) == (1, 4, 1)
    assert reg.get("demo__send_email").description == "Send an e-mail with attachments."


def test_replace_source_drops_missing_tools_and_their_edges(reg: Registry) -> None:
    summary = reg.ingest("demo", [t for t in TOOLS if t.name != "get_stock_ticker"], [])
    assert summary.removed == 1
    with pytest.raises(ToolNotFound):
        reg.get("demo__get_stock_ticker")
    assert list(reg.graph.edges()) == []
    other = reg.ingest("other", [tool("ping", "Ping a host.", source="other")])
    assert other.added == 1 and reg.sources() == ["demo", "other"]
    assert reg.ingest("other", []).removed == 1 and reg.sources() == ["demo"]


def test_what_retrieval_walks_follows_each_write_to_the_tools_it_touched(reg: Registry) -> None:
    """Each write republishes the walk map of the tools it changed (and of their dependents) alone."""
    quote = tool("quote", "Quote a share by ticker.", source="other")
    needs_ticker = DependencyEdge(
        tool="other__quote", depends_on="demo__get_stock_ticker", kind=EdgeKind.PARAMETER_DIRECTLY_DEPENDS_ON
    )
    reg.ingest("other", [quote], [needs_ticker])
    assert reg.dependencies("other__quote") == [needs_ticker]
    assert [e.depends_on for e in reg.dependencies("demo__get_stock_price")] == ["demo__get_stock_ticker"]
    reg.ingest("demo", [t for t in TOOLS if t.name != "get_stock_ticker"], [])
    assert reg.dependencies("other__quote") == []  # its dependency left with the demo source's tool
    assert reg.dependencies("demo__get_stock_price") == []
    assert reg.dependencies("demo__get_stock_ticker") == []
    assert reg.edges() == ()


def test_exclude_sources_hides_an_upstream(reg: Registry) -> None:
    reg.ingest("other", [tool("stock_quote", "Stock price quote for a ticker.", source="other")])
    ids = [r.tool_id for r in retrieve_tools(reg, "stock price", exclude_sources={"other"})]
    assert ids and not any(i.startswith("other__") for i in ids)


def test_bad_edges_are_refused_and_the_registry_is_intact(reg: Registry) -> None:
    before = {t.id: t.content_hash for t in reg.tools()}
    dangling = DependencyEdge(
        tool="demo__send_email", depends_on="demo__validate_email", kind=EdgeKind.TOOL_DIRECTLY_DEPENDS_ON
    )
    new_tools = [*TOOLS, tool("brand_new", "Something new.")]
    with pytest.raises(GraphError, match="demo__validate_email"):
        reg.ingest("demo", new_tools, [*EDGES, dangling])
    assert {t.id: t.content_hash for t in reg.tools()} == before
    assert len(list(reg.graph.edges())) == 2
    with pytest.raises(RegistryError, match="belongs to source"):
        reg.ingest("demo", [tool("x", "y", source="elsewhere")])


def test_another_model_is_refused_with_how_to_reindex(reg: Registry) -> None:
    with pytest.raises(ModelMismatchError, match="toolweave reindex"):
        Registry.open(reg.path, embedder=Embedder("BAAI/bge-small-en-v1.5"))


def test_foreign_directory_is_not_taken_over(tmp_path: Path, shared_embedder: Embedder) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(NotARegistryError, match=r"notes\.txt"):
        Registry.open(tmp_path, embedder=shared_embedder)
    assert [p.name for p in tmp_path.iterdir()] == ["notes.txt"]
    (tmp_path / "notes.txt").unlink()
    (tmp_path / "registry.json").write_text(json.dumps({"format": "something-else"}))
    with pytest.raises(NotARegistryError, match="registry metadata"):
        Registry.open(tmp_path, embedder=shared_embedder)


def test_reindex_keeps_tools_and_graph(reg: Registry, shared_embedder: Embedder) -> None:
    assert Registry.reindex(reg.path, embedder=shared_embedder) == len(TOOLS)
    again = Registry.open(reg.path, embedder=shared_embedder)
    assert len(again) == len(TOOLS) and len(list(again.graph.edges())) == 2


def test_edges_are_inferred_at_ingest_for_sources_that_declare_none(
    tmp_path: Path, shared_embedder: Embedder
) -> None:
    reg = Registry.open(tmp_path / "reg", embedder=shared_embedder)
    bank = BANK
    reg.ingest("bank", bank)
    inferred = [e for e in reg.graph.edges() if e.origin == "inferred"]
    assert [(e.tool, e.depends_on) for e in inferred] == [("bank__add_alarm", "bank__get_user_token")]
    # a manifest removal hides that inferred edge in its gateway's view, across re-ingests of changed
    # tools; the shared graph keeps what inference says (another replica's manifest may not remove it)
    reg.set_overrides(GraphOverrides(remove=[EdgeSelector("bank__add_alarm", "bank__get_user_token")]))
    reg.ingest("bank", [bank[0], bank[1].model_copy(update={"description": "Set an alarm clock."})])
    assert [e for e in reg.edges() if e.origin == "inferred"] == []
    assert [e.origin for e in reg.graph.edges()] == ["inferred"]
    # without the removal, the same source declaring its own edges: declared ones replace inferred ones
    reg.set_overrides(GraphOverrides())
    declared = DependencyEdge(
        tool="bank__add_alarm", depends_on="bank__get_user_token", kind=EdgeKind.TOOL_DIRECTLY_DEPENDS_ON
    )
    reg.ingest("bank", bank, [declared])
    assert [e.origin for e in reg.graph.edges()] == ["declared"]


def test_blas_threads_are_pinned_once_per_process(
    tmp_path: Path, shared_embedder: Embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A process-wide setting: made at the first registry opened, not again on reloads or other opens."""
    import threadpoolctl

    from toolweave.registry import snapshot as snapshot_module

    calls: list[dict[str, object]] = []
    monkeypatch.setattr(threadpoolctl, "threadpool_limits", lambda **kw: calls.append(kw))
    snapshot_module.single_threaded_blas.cache_clear()
    try:
        first = Registry.open(tmp_path / "a", embedder=shared_embedder)
        first.ingest("demo", TOOLS, EDGES)  # a write reloads the snapshot
        Registry.open(tmp_path / "b", embedder=shared_embedder)
        assert calls == [{"limits": 1, "user_api": "blas"}]
    finally:
        snapshot_module.single_threaded_blas.cache_clear()  # the next registry pins for real


def test_a_full_text_index_out_of_reach_leaves_vector_search_answering(
    reg: Registry, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The store's full-text index unreachable (an object store down): searches rank by the vectors
    held in memory, with one warning per outage, and use BM25 again once the index answers."""
    real = reg._state.table.text_search

    def store_down(*_args: object) -> list[tuple[str, float]]:
        raise RegistryError("tool table: full-text search failed: connection refused")

    monkeypatch.setattr(reg._state.table, "text_search", store_down)
    for query in ("share price of a stock", "weather forecast"):
        ((vector_hits, text_hits),) = reg.search([(query,)], 3)
        assert vector_hits and text_hits == []
    ranked = retrieve_tools(reg, "weather forecast", RetrievalSettings())
    assert ranked[0].tool_id == "demo__get_weather"
    assert caplog.text.count("full-text search failed, vector search only") == 1

    monkeypatch.setattr(reg._state.table, "text_search", real)
    ((_, text_hits),) = reg.search([("weather forecast",)], 3)
    assert text_hits[0].tool_id == "demo__get_weather"
    assert "full-text search works again" in caplog.text


def takes(*names: str) -> dict[str, Any]:
    return {"type": "object", "properties": {n: {"type": "string"} for n in names}, "required": list(names)}


def test_a_tool_whose_producer_left_is_linked_to_the_next_best_one(
    tmp_path: Path, shared_embedder: Embedder
) -> None:
    """What inference over the registry afresh would give: when the tool an input came from leaves (or
    changes), the tools that took it from there get their next-best producer, not nothing."""
    weather = tool(
        "forecast_weather",
        "Weather forecast for a country.",
        source="geo",
        input_schema=takes("country_code"),
    )
    by_name = tool(
        "get_country_code", "The code of a country.", source="geo", input_schema=takes("country_name")
    )
    by_output = tool(
        "lookup_nation",
        "Find a nation by name; returns a country_code.",
        source="geo",
        input_schema=takes("name"),
    )
    reg = Registry.open(tmp_path / "reg", embedder=shared_embedder)

    def producers(registry: Registry) -> list[str]:
        return [e.depends_on for e in registry.edges() if e.tool == "geo__forecast_weather"]

    reg.ingest("geo", [weather, by_name, by_output])
    assert producers(reg) == ["geo__lookup_nation"]  # the description saying so says more than a name
    reg.ingest("geo", [weather, by_name])  # that producer leaves
    assert producers(reg) == ["geo__get_country_code"]
    fresh = Registry.open(tmp_path / "fresh", embedder=shared_embedder)
    fresh.ingest("geo", [weather, by_name])
    assert {e.key for e in reg.edges()} == {e.key for e in fresh.edges()}


def test_a_model_that_embeds_every_vector_alike_opens_the_registry_and_another_needs_a_reindex(
    tmp_path: Path,
) -> None:
    # the adapter maps requests after MiniLM embeds them: the registry holds exactly its vectors
    reg = demo_registry(tmp_path / "reg", Embedder(MINILM_MODEL), TOOLS)
    reg.close()
    adapted = Registry.open(reg.path, embedder=Embedder(TOOL_ADAPTER.name))
    assert adapted.embedder.model_id == TOOL_ADAPTER.name and len(adapted) == len(TOOLS)
    hits = retrieve_tools(adapted, "send a message by e-mail", RetrievalSettings(method="vector"))
    assert hits and hits[0].tool_id == "demo__send_email", hits
    adapted.close()
    # toolret-v2 embeds requests (and so usage examples) with its own encoder: chosen, it needs a reindex
    with pytest.raises(ModelMismatchError, match=f"{TOOLRET_V2.name}.*toolweave reindex"):
        Registry.open(reg.path, embedder=Embedder(TOOLRET_V2.name))
    with pytest.raises(ModelMismatchError, match=r"BAAI/bge-small-en-v1\.5.*toolweave reindex"):
        Registry.open(reg.path, embedder=Embedder("BAAI/bge-small-en-v1.5"))
    assert Registry.reindex(reg.path, embedder=Embedder(TOOLRET_V2.name)) == len(TOOLS)
    again = Registry.open(reg.path, embedder=Embedder(TOOLRET_V2.name))
    assert again.embedder.model_id == TOOLRET_V2.name and len(again) == len(TOOLS)
    again.close()


def test_a_registry_built_with_a_shipped_model_keeps_it_when_nobody_chose_one(
    tmp_path: Path, shared_embedder: Embedder
) -> None:
    # upgrading to a new default model must not lock users out of the registry the old default built
    default = Settings().embedding_model
    older = TOOLRET_V2.name if default == MINILM_MODEL else MINILM_MODEL
    demo_registry(tmp_path / "reg", Embedder(older), TOOLS).close()
    served = Registry.open(tmp_path / "reg", settings=Settings(home=tmp_path / "reg"))
    assert served.embedder.model_id == older
    hits = retrieve_tools(served, "send a message by e-mail", RetrievalSettings(method="vector"))
    assert hits and hits[0].tool_id == "demo__send_email", hits
    served.close()
    chosen = Settings(home=tmp_path / "reg", embedding_model=default)  # chosen explicitly: the hint
    with pytest.raises(ModelMismatchError, match="toolweave reindex"):
        Registry.open(tmp_path / "reg", settings=chosen)
