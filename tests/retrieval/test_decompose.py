"""Query decomposition and the fusion of per-variant lists (unit tests of our own logic: no registry)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from tests.retrieval.test_pipeline import DOCS, SOURCES, WordIndex, deps
from toolweave.benchmark.recorded import RecordedGraph, RecordedIndex
from toolweave.records import SearchResults, SearchScope
from toolweave.retrieval.decompose import (
    Decomposition,
    Pass,
    decompose_query,
    fuse_max,
    part_weights,
)
from toolweave.retrieval.pipeline import decomposition_of, retrieve
from toolweave.retrieval.results import Hit
from toolweave.settings import RetrievalSettings


@pytest.mark.parametrize(
    ("query", "parts"),
    [
        (
            "Find the weather forecast in Paris and then book a restaurant table for two.",
            ["Find the weather forecast in Paris", "book a restaurant table for two"],
        ),
        (
            "Show the latest stock prices for Apple. Additionally, recommend a beginner Python course.",
            ["Show the latest stock prices for Apple", "recommend a beginner Python course"],
        ),
        (
            "Translate this paragraph into French; summarise the news headlines about Mars",
            ["Translate this paragraph into French", "summarise the news headlines about Mars"],
        ),
        (
            "Get the current weather in Tokyo, and also list trending GitHub repositories, then convert "
            "the report into a PDF file",
            [
                "Get the current weather in Tokyo",
                "list trending GitHub repositories",
                "convert the report into a PDF file",
            ],
        ),
    ],
)
def test_multi_part_requests_split_into_their_parts(query: str, parts: list[str]) -> None:
    # the whole query always comes first
    assert decompose_query(query, level="clauses", min_content_words=3) == [query, *parts]


@pytest.mark.parametrize(
    "query",
    [
        "Find a programming course that covers Python and Java",  # a bare "and" is not a cut by default
        "Can you tell me the weather, and also?",  # a part without content words stays joined
        "What time is it in Tokyo",
        "Book a flight. Thanks!",  # "Thanks" is no request of its own
        "",
    ],
)
def test_single_requests_stay_whole(query: str) -> None:
    assert decompose_query(query, level="clauses", min_content_words=3) == [query]
    assert decompose_query(query) == [query]


def test_guards_and_levels() -> None:
    query = "Find top rated restaurants and nearby career opportunities in this city"
    assert decompose_query(query, level="clauses") == [query]
    assert decompose_query(query, level="and", min_content_words=3) == [
        query,
        "Find top rated restaurants",
        "nearby career opportunities in this city",
    ]
    # a short clause joins its neighbour instead of becoming a sub-query
    assert decompose_query(query, level="and", min_content_words=5) == [query]
    two = "Check weather forecast in Paris. Book cheap flights to Rome. Find vegan restaurants in Milan."
    assert len(decompose_query(two, min_content_words=3)) == 4
    assert decompose_query(two, min_content_words=3, max_parts=2) == [
        two,
        "Check weather forecast in Paris",
        "Book cheap flights to Rome. Find vegan restaurants in Milan",
    ]
    assert decompose_query(two, level="sentences", min_content_words=3)[1:] == [
        "Check weather forecast in Paris",
        "Book cheap flights to Rome",
        "Find vegan restaurants in Milan",
    ]


WHOLE = [Hit("a", 0.9), Hit("b", 0.8), Hit("c", 0.5), Hit("x", 0.1)]
PART_1 = [Hit("b", 0.7), Hit("c", 0.6), Hit("a", 0.2)]
PART_2 = [Hit("y", 9.0), Hit("c", 5.0), Hit("a", 1.0)]


def test_max_takes_each_tools_best_normalised_score() -> None:
    fused = fuse_max([WHOLE, PART_1, PART_2], 10)
    # per list: best 1, weakest 0; ties keep the first-seen order (the whole query's first)
    assert [(h.tool_id, round(h.score, 3)) for h in fused] == [
        ("a", 1.0),
        ("b", 1.0),
        ("y", 1.0),
        ("c", 0.8),
        ("x", 0.0),
    ]


def test_one_list_is_returned_as_it_is() -> None:
    assert fuse_max([WHOLE], 2) == WHOLE[:2]


def test_part_weights_are_the_parts_confidence_against_the_whole_querys() -> None:
    assert part_weights([0.8, 0.4, 0.8, 0.96]) == pytest.approx([1.0, 0.5, 1.0, 1.0])  # capped at 1
    assert part_weights([0.8, -0.1]) == [1.0, 0.0]  # a part that matches nothing weighs nothing
    # without evidence on either side a part weighs 1, as unweighted
    assert part_weights([None, 0.3]) == [1.0, 1.0]
    assert part_weights([0.0, 0.3]) == [1.0, 1.0]
    assert part_weights([0.8, None]) == [1.0, 1.0]
    assert part_weights([]) == []


def test_weights_keep_a_vague_parts_leader_below_the_whole_querys() -> None:
    flat = fuse_max([WHOLE, PART_1, PART_2], 10)
    assert flat[2].tool_id == "y" and flat[2].score == 1.0  # PART_2's leader ties the whole query's
    weighted = fuse_max([WHOLE, PART_1, PART_2], 10, weights=[1.0, 1.0, 0.5])
    assert [(h.tool_id, round(h.score, 3)) for h in weighted] == [
        ("a", 1.0),
        ("b", 1.0),  # PART_1 keeps its full weight
        ("c", 0.8),
        ("y", 0.5),
        ("x", 0.0),
    ]


class Unweighted(Decomposition):
    """The gateway's split with every part's list at full weight (what the weighting must beat)."""

    def fuse(self, passes: Sequence[Pass], k: int) -> list[Hit]:
        return fuse_max([hits for hits, _ in passes], k)


def test_retrieve_weighs_each_part_by_its_cosine() -> None:
    """A two-sentence request whose second sentence asks for nothing: unweighted, that sentence's best
    match (a tool of another API) ties the request's own first hit; weighted by cosine it falls behind
    every tool the whole request finds well."""
    whole = "Apply for a loan at checkout. It is a multistep process that needs several API calls."
    vague = "It is a multistep process that needs several API calls"
    wanted = [Hit("loan", 0.70), Hit("terms", 0.60), Hit("customer", 0.55), Hit("other_api", 0.30)]
    hits: dict[tuple[str, ...], tuple[list[Hit], list[Hit]]] = {
        (whole,): (wanted, []),
        ("Apply for a loan at checkout",): (wanted, []),
        (vague,): ([Hit("other_api", 0.35), Hit("loan", 0.20), Hit("terms", 0.18)], []),
    }
    index = RecordedIndex(hits=hits)
    params = RetrievalSettings(method="vector", final_k=4)

    def ranked(decomposition: Decomposition) -> list[str]:
        found = retrieve(whole, index, RecordedGraph({}), params, decomposition=decomposition)
        return [r.tool_id for r in found]

    assert ranked(Unweighted(min_content_words=3)) == ["loan", "other_api", "terms", "customer"]
    # the vague sentence's weight: its best cosine 0.35 against the whole request's 0.70
    assert ranked(Decomposition(min_content_words=3)) == ["loan", "terms", "customer", "other_api"]


class CountingIndex(WordIndex):
    """The test fleet's index, counting the query variants of each search call made on it."""

    def __init__(self) -> None:
        super().__init__(DOCS, SOURCES)
        self.calls: list[int] = []

    def search(
        self, queries: Sequence[tuple[str, ...]], k: int, scope: SearchScope | None = None
    ) -> SearchResults:
        self.calls.append(len(queries))
        return super().search(queries, k, scope)


def test_retrieve_searches_the_parts_in_one_call_and_fuses_them() -> None:
    index = CountingIndex()
    query = "alarm clock for seven tomorrow morning, and also show the stock price of a ticker"
    params = RetrievalSettings(method="hybrid", final_k=2)
    whole = [r.tool_id for r in retrieve(query, index, deps, params)]
    split = [
        r.tool_id
        for r in retrieve(
            query,
            index,
            deps,
            params,
            decomposition=Decomposition(level="clauses", min_content_words=3),
        )
    ]
    assert index.calls == [1, 3]  # the whole query, then the whole query and both parts in one search
    assert "a__set_alarm" not in whole  # the stock words outvote the alarm in the whole query
    assert split == ["a__get_price", "a__set_alarm"]


def test_the_setting_decides_when_no_decomposition_is_passed() -> None:
    index = CountingIndex()
    query = "Set an alarm clock for seven tomorrow morning. Show the stock price of a ticker symbol."
    default = [r.tool_id for r in retrieve(query, index, deps, RetrievalSettings(method="hybrid", final_k=2))]
    retrieve(query, index, deps, RetrievalSettings(method="hybrid", final_k=2, decompose="off"))
    retrieve(query, index, deps, RetrievalSettings(method="bm25", final_k=2))
    # on by default, at sentence ends, the parts weighted by cosine (bench/HISTORY.md, "Query
    # decomposition that does no harm"); never with bm25 alone: no cosine to weigh the parts
    assert RetrievalSettings().decompose == "sentences"
    assert decomposition_of(RetrievalSettings()) == Decomposition(level="sentences", min_content_words=4)
    assert decomposition_of(RetrievalSettings()) == Decomposition()  # the defaults are the gateway's
    assert decomposition_of(RetrievalSettings(method="bm25")) is None
    assert index.calls == [3, 1, 1]  # whole query + both sentences; then the whole query alone, twice
    assert set(default) == {"a__set_alarm", "a__get_price"}
