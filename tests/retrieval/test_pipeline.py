"""The retrieval pipeline over an in-memory index (unit test of our own logic: no registry)."""

from __future__ import annotations

from collections.abc import Collection, Sequence

import pytest

from toolweave.errors import RetrievalError
from toolweave.records import DependencyEdge, EdgeKind
from toolweave.retrieval.pipeline import retrieve
from toolweave.retrieval.results import Hit
from toolweave.settings import RetrievalSettings


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
        self,
        queries: Sequence[tuple[str, ...]],
        k: int,
        exclude_sources: Collection[str] = (),
        *,
        vector: bool = True,
        text: bool = True,
    ) -> list[tuple[list[Hit], list[Hit]]]:
        return [
            (
                self.vector_hits(" ".join(q), k, exclude_sources) if vector else [],
                self.text_hits(q[0], k, exclude_sources) if text else [],
            )
            for q in queries
        ]

    def find(self, tool_id: str) -> object | None:
        return self.docs.get(tool_id)


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
        out = retrieve("stock price", index, deps, RetrievalSettings(method=method, final_k=5))  # type: ignore[arg-type]
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
