"""The retrieval pipeline over an in-memory index (unit test of our own logic: no registry)."""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from typing import TypeVar

import pytest

from toolweave.errors import RetrievalError
from toolweave.names import NameVocabulary
from toolweave.records import DependencyEdge, EdgeKind, SearchResults, SearchScope
from toolweave.retrieval.pipeline import retrieve
from toolweave.retrieval.results import Hit
from toolweave.settings import RetrievalSettings

T = TypeVar("T")


class WordIndex:
    """Scores tools by shared words; 'vector' and 'text' rank differently so fusion is visible."""

    def __init__(self, docs: dict[str, str], sources: dict[str, str]) -> None:
        self.docs, self.sources = docs, sources
        self.queries: list[str] = []

    def _score(self, query: str, k: int, exclude: Collection[str], bonus: str) -> list[Hit]:
        self.queries.append(query)
        words = set(query.lower().split())
        hits = []
        for tool, doc in self.docs.items():
            shared = len(words & set(doc.split()))
            if shared and self.sources[tool] not in exclude:
                hits.append(Hit(tool, shared + (0.5 if bonus in tool else 0.0)))
        return sorted(hits, key=lambda h: -h.score)[:k]

    def vector_hits(self, query: str, k: int, exclude_sources: Collection[str] = ()) -> list[Hit]:
        return self._score(query, k, exclude_sources, "get")

    def text_hits(self, query: str, k: int, exclude_sources: Collection[str] = ()) -> list[Hit]:
        return self._score(query, k, exclude_sources, "set")

    def search(
        self, queries: Sequence[tuple[str, ...]], k: int, scope: SearchScope | None = None
    ) -> SearchResults:
        scope = scope or SearchScope()
        return [
            (
                self.vector_hits(" ".join(q), k, scope.exclude_sources) if scope.vector else [],
                self.text_hits(q[0], k, scope.exclude_sources) if scope.text else [],
            )
            for q in queries
        ]

    def is_destructive(self, tool_id: str) -> bool:
        return False

    def name_vocabulary(self) -> NameVocabulary:
        return NameVocabulary()  # no name match: these tests are about fusion, floor and walk

    def calibration(self, key: str, compute: Callable[[Sequence[str]], T]) -> T:
        return compute([])  # no probes: equal weights


DOCS = {
    "a__get_price": "stock price of a ticker",
    "a__get_ticker": "ticker symbol of a company",
    "b__net_status": "network connectivity status",
    "a__set_alarm": "alarm clock",
}
SOURCES = {t: t.split("__")[0] for t in DOCS}
EDGES = {
    "a__get_price": [
        DependencyEdge(
            tool="a__get_price", depends_on="a__get_ticker", kind=EdgeKind.PARAMETER_DIRECTLY_DEPENDS_ON
        )
    ],
    "a__get_ticker": [
        DependencyEdge(
            tool="a__get_ticker", depends_on="b__net_status", kind=EdgeKind.TOOL_DIRECTLY_DEPENDS_ON
        )
    ],
}


def deps(tool: str, kinds: Sequence[EdgeKind] | None) -> list[DependencyEdge]:
    return [e for e in EDGES.get(tool, []) if kinds is None or e.kind in kinds]


def test_grtf_walks_dependencies_of_first_pass_hits() -> None:
    index = WordIndex(DOCS, SOURCES)
    out = retrieve("stock price", index, deps, RetrievalSettings(method="grtf", top_k=1, final_k=5))
    assert [r.tool_id for r in out] == ["a__get_price", "a__get_ticker", "b__net_status"]
    assert out[1].reason == "dependency" and out[1].via == "a__get_price"


def test_plain_methods_do_not_walk() -> None:
    index = WordIndex(DOCS, SOURCES)
    for method in ("vector", "bm25", "hybrid"):
        out = retrieve("stock price", index, deps, RetrievalSettings(method=method, final_k=5))
        assert [r.tool_id for r in out] == ["a__get_price"]
        assert out[0].reason == "first_pass"


def test_excluded_sources_stay_out_of_hits_and_walks() -> None:
    index = WordIndex(DOCS, SOURCES)
    out = retrieve(
        "stock price", index, deps, RetrievalSettings(top_k=1), exclude_sources={"b"}, source_of=SOURCES.get
    )
    assert "b__net_status" not in [r.tool_id for r in out]


def test_context_rides_along_with_the_query() -> None:
    index = WordIndex(DOCS, SOURCES)
    retrieve(
        "ticker symbol", index, deps, RetrievalSettings(method="hybrid"), context=["stock price", "alarm"]
    )
    # recent other requests join the vector side, latest first; the full-text side keeps the query alone
    assert index.queries == ["ticker symbol alarm stock price", "ticker symbol"]
    index.queries.clear()
    retrieve("ticker symbol", index, deps, RetrievalSettings(method="hybrid"), context=["ticker symbol"])
    assert index.queries == ["ticker symbol", "ticker symbol"]  # a repeated query is not its own context


def test_empty_query_is_an_error() -> None:
    with pytest.raises(RetrievalError, match="empty"):
        retrieve("   ", WordIndex(DOCS, SOURCES), deps, RetrievalSettings())


def test_floor_marks_weak_hits_unpublished_but_keeps_dependencies_of_kept_ones() -> None:
    docs = {**DOCS, "a__get_quote": "price", "a__get_news": "news", "a__get_filing": "company"}
    index = WordIndex(docs, {t: t.split("__")[0] for t in docs})
    query = "stock price of a ticker symbol company news"
    off = retrieve(query, index, deps, RetrievalSettings(top_k=3, floor_relative=0.0))
    on = retrieve(query, index, deps, RetrievalSettings(top_k=3, floor_relative=0.5))
    # one shared word each: weak matches (and enough candidates for the floor to apply)
    assert {"a__get_quote", "a__get_news", "a__get_filing"} <= {r.tool_id for r in off}
    assert all(r.publish for r in off)  # floor off: everything listed is published
    assert [r.tool_id for r in on] == [r.tool_id for r in off]  # the floor never cuts the list
    published = [r for r in on if r.publish]
    assert [r.tool_id for r in published] == ["a__get_price", "a__get_ticker", "b__net_status"]
    assert published[2].reason == "dependency"  # matches nothing itself, but the kept tools need it


class AskingIndex(WordIndex):
    """Answers ``is_destructive`` itself, as a registry does."""

    def is_destructive(self, tool_id: str) -> bool:
        return tool_id == "a__get_ticker"


def test_destructive_tools_face_a_higher_floor() -> None:
    docs = {
        **DOCS,
        "a__get_ticker": "ticker and price symbol",  # relevance 0.6 of the turn: kept unless destructive
        "a__get_quote": "price quote of a stock ticker",
        "a__list": "list tickers of a stock",
        "a__news": "stock news",
        "a__chart": "price chart",
    }
    sources = {t: t.split("__")[0] for t in docs}
    floor = {"floor_relative": 0.3, "floor_absolute": 0.0, "method": "vector", "final_k": 6}
    published = {}
    for extra in (0.0, 0.6):
        params = RetrievalSettings(**floor, floor_destructive=extra)
        out = retrieve("stock ticker price", AskingIndex(docs, sources), deps, params)
        published[extra] = {r.tool_id for r in out if r.publish}
    assert "a__get_ticker" in published[0.0]
    assert published[0.6] == published[0.0] - {"a__get_ticker"}
