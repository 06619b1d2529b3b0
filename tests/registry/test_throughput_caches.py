"""Throughput for many sessions: the single-threaded query model and the per-snapshot full-text answer cache.

Both must leave rankings exactly as they were: the query instance gives the document instance's vectors
bit for bit, and a cached BM25 answer is the one LanceDB gave for the same rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from tests.registry.test_usage import tool
from toolweave.registry import Embedder, Registry
from toolweave.settings import MINILM_MODEL

pytestmark = pytest.mark.integration


TOOLS = [
    tool("get_weather", "Weather forecast for a city."),
    tool("send_email", "Send an email message to an address."),
    tool("get_stock_price", "Current share price of a company's stock, by ticker symbol."),
]


def test_queries_run_on_their_own_single_threaded_instance_with_identical_vectors() -> None:
    embedder = Embedder(MINILM_MODEL)  # one model for both (a query encoder's are two)
    texts = ["weather in Rome tomorrow", "send an email to my boss", "¿qué tiempo hace?"]
    documents = embedder.embed_documents(texts)
    queries = np.stack(embedder.embed_queries(texts))
    assert embedder._load_for_queries() is not embedder._load()  # two instances: ingest keeps every core
    assert np.array_equal(queries, documents)  # same model, same vectors: rankings cannot move


def test_a_subclass_caching_embed_documents_still_sees_the_queries(shared_embedder: Embedder) -> None:
    class Counting(Embedder):
        def __init__(self) -> None:
            super().__init__(MINILM_MODEL)  # requests and tools share its model
            self.seen: list[str] = []

        def embed_documents(self, texts: Sequence[str], batch_size: int = 16) -> np.ndarray:
            self.seen.extend(texts)
            return shared_embedder.embed_documents(texts, batch_size)

    counting = Counting()
    counting.embed_queries(["a query the disk cache must see"])
    assert counting.seen == ["a query the disk cache must see"]


@pytest.fixture
def reg(tmp_path: Path, shared_embedder: Embedder) -> Registry:
    registry = Registry.open(tmp_path / "reg", embedder=shared_embedder)
    registry.ingest("demo", TOOLS)
    return registry


def test_repeated_full_text_queries_are_answered_without_lancedb(
    reg: Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = reg._state.table
    calls: list[str] = []
    search = table.text_search

    def counted(query: str, limit: int) -> list[tuple[str, float]]:
        calls.append(query)
        return search(query, limit)

    monkeypatch.setattr(table, "text_search", counted)
    first = reg.text_hits("weather forecast", 5)
    assert first and first[0].tool_id == "demo__get_weather"
    assert reg.text_hits("weather forecast", 5) == first
    assert calls == ["weather forecast"]  # the second answer came from the cache
    reg.text_hits("weather forecast", 7)  # another limit is another question
    assert calls == ["weather forecast", "weather forecast"]


def test_an_ingest_invalidates_cached_full_text_answers(reg: Registry) -> None:
    assert [h.tool_id for h in reg.text_hits("umbrella", 5)] == []
    reg.ingest("demo", [*TOOLS, tool("rain_alert", "Tells you when to take an umbrella.")])
    assert [h.tool_id for h in reg.text_hits("umbrella", 5)] == ["demo__rain_alert"]
    reg.ingest("demo", TOOLS)  # removed again: its cached hit must go with it
    assert [h.tool_id for h in reg.text_hits("umbrella", 5)] == []


def test_cached_queries_answers_only_from_the_cache(shared_embedder: Embedder) -> None:
    texts = ["a question nobody asked before 7f3a", "and its follow-up 7f3a"]
    assert shared_embedder.cached_queries(texts) is None  # never runs the model itself
    embedded = shared_embedder.embed_queries(texts)
    cached = shared_embedder.cached_queries(texts)
    assert cached is not None and all(a is b for a, b in zip(cached, embedded, strict=True))
