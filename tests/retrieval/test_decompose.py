"""Query decomposition and the fusion of per-variant lists (unit tests of our own logic: no registry)."""

from __future__ import annotations

import pytest

from tests.retrieval.test_pipeline import DOCS, SOURCES, WordIndex, deps
from toolweave.benchmark.recorded import RecordedGraph, RecordedIndex
from toolweave.retrieval.decompose import (
    Decomposition,
    decompose_query,
    fuse_variants,
    list_confidence,
    part_weights,
)
from toolweave.retrieval.fusion import RRF_K
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


def test_rrf_sums_reciprocal_ranks() -> None:
    fused = fuse_variants([WHOLE, PART_1, PART_2], "rrf", 10)
    assert [h.tool_id for h in fused] == ["a", "c", "b", "y", "x"]  # a: ranks 1, 3, 3; c: 3, 2, 2
    assert fused[0].score == pytest.approx(1 / (RRF_K + 1) + 2 / (RRF_K + 3))
    assert fused[1].score == pytest.approx(1 / (RRF_K + 3) + 2 / (RRF_K + 2))


def test_interleave_takes_turns_from_the_whole_query() -> None:
    fused = fuse_variants([WHOLE, PART_1, PART_2], "interleave", 10)
    assert [h.tool_id for h in fused] == ["a", "b", "y", "c", "x"]
    assert [h.score for h in fused] == sorted((h.score for h in fused), reverse=True)
    assert [h.tool_id for h in fuse_variants([WHOLE, PART_1, PART_2], "interleave", 3)] == ["a", "b", "y"]


def test_max_takes_each_tools_best_normalised_score() -> None:
    fused = fuse_variants([WHOLE, PART_1, PART_2], "max", 10)
    # per list: best 1, weakest 0; ties keep the first-seen order (the whole query's first)
    assert [(h.tool_id, round(h.score, 3)) for h in fused] == [
        ("a", 1.0),
        ("b", 1.0),
        ("y", 1.0),
        ("c", 0.8),
        ("x", 0.0),
    ]
    weighted = fuse_variants([WHOLE, PART_1, PART_2], "max", 10, part_weight=0.5)
    assert [h.tool_id for h in weighted] == ["a", "b", "c", "y", "x"]  # c: 0.5 from the whole query


def test_one_list_is_returned_as_it_is() -> None:
    for method in ("rrf", "interleave", "max"):
        assert fuse_variants([WHOLE], method, 2) == WHOLE[:2]


def test_list_confidence_reads_the_best_cosine_or_the_leaders_gap() -> None:
    hits = [Hit("a", 4.0), Hit("b", 2.0), Hit("c", 1.5), Hit("d", 0.0)]
    assert list_confidence(hits, {"a": 0.41, "z": 0.62}, "cosine") == pytest.approx(0.62)
    # (best - median) / (best - worst): the median of 4, 2, 1.5, 0 is 1.75
    assert list_confidence(hits, {}, "gap") == pytest.approx((4.0 - 1.75) / 4.0)
    # no evidence: no vector side, a flat or one-hit list, or no weighting at all
    assert list_confidence(hits, {}, "cosine") is None
    assert list_confidence([Hit("a", 1.0), Hit("b", 1.0)], {}, "gap") is None
    assert list_confidence([Hit("a", 1.0)], {}, "gap") is None
    assert list_confidence(hits, {"a": 0.9}, "flat") is None


def test_part_weights_are_the_parts_confidence_against_the_whole_querys() -> None:
    assert part_weights([0.8, 0.4, 0.8, 0.96]) == pytest.approx([1.0, 0.5, 1.0, 1.0])  # capped at 1
    assert part_weights([0.8, 0.4, 0.2], power=2.0) == pytest.approx([1.0, 0.25, 0.0625])
    assert part_weights([0.8, -0.1]) == [1.0, 0.0]  # a part that matches nothing weighs nothing
    # without evidence on either side a part weighs 1, as unweighted
    assert part_weights([None, 0.3]) == [1.0, 1.0]
    assert part_weights([0.0, 0.3]) == [1.0, 1.0]
    assert part_weights([0.8, None]) == [1.0, 1.0]
    assert part_weights([]) == []


def test_weights_keep_a_vague_parts_leader_below_the_whole_querys() -> None:
    flat = fuse_variants([WHOLE, PART_1, PART_2], "max", 10)
    assert flat[2].tool_id == "y" and flat[2].score == 1.0  # PART_2's leader ties the whole query's
    weighted = fuse_variants([WHOLE, PART_1, PART_2], "max", 10, weights=[1.0, 1.0, 0.5])
    assert [(h.tool_id, round(h.score, 3)) for h in weighted] == [
        ("a", 1.0),
        ("b", 1.0),  # PART_1 keeps its full weight
        ("c", 0.8),
        ("y", 0.5),
        ("x", 0.0),
    ]
    # the weights multiply ``part_weight``
    both = fuse_variants([WHOLE, PART_1, PART_2], "max", 10, part_weight=0.5, weights=[1.0, 1.0, 0.5])
    assert [(h.tool_id, round(h.score, 3)) for h in both][3:] == [("y", 0.25), ("x", 0.0)]


def test_retrieve_weighs_each_part_by_its_cosine() -> None:
    """A two-sentence request whose second sentence asks for nothing: unweighted, that sentence's best
    match (a tool of another API) ties the request's own first hit; weighted by cosine it falls behind
    every tool the whole request finds well."""
    whole = "Apply for a loan at checkout. It is a multistep process that needs several API calls."
    vague = "It is a multistep process that needs several API calls"
    wanted = [Hit("loan", 0.70), Hit("terms", 0.60), Hit("customer", 0.55), Hit("other_api", 0.30)]
    hits = {
        (whole,): (wanted, []),
        ("Apply for a loan at checkout",): (wanted, []),
        (vague,): ([Hit("other_api", 0.35), Hit("loan", 0.20), Hit("terms", 0.18)], []),
    }
    index = RecordedIndex(hits=hits)
    params = RetrievalSettings(method="vector", final_k=4)

    def ranked(decomposition: Decomposition) -> list[str]:
        found = retrieve(whole, index, RecordedGraph({}), params, decomposition=decomposition)
        return [r.tool_id for r in found]

    flat = Decomposition(min_content_words=3, weighting="flat")
    assert ranked(flat) == ["loan", "other_api", "terms", "customer"]
    # the vague sentence's weight: its best cosine 0.35 against the whole request's 0.70
    assert ranked(Decomposition(min_content_words=3)) == ["loan", "terms", "customer", "other_api"]


def counting_index() -> tuple[WordIndex, list[int]]:
    """The test fleet's index, and the number of query variants of each search call made on it."""
    index = WordIndex(DOCS, SOURCES)
    calls: list[int] = []
    search = index.search

    def counting_search(queries, k, scope=None):
        calls.append(len(queries))
        return search(queries, k, scope)

    index.search = counting_search  # type: ignore[method-assign]
    return index, calls


def test_retrieve_searches_the_parts_in_one_call_and_fuses_them() -> None:
    index, calls = counting_index()
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
            decomposition=Decomposition("interleave", level="clauses", min_content_words=3),
        )
    ]
    assert calls == [1, 3]  # the whole query, then the whole query and both parts in one search
    assert "a__set_alarm" not in whole  # the stock words outvote the alarm in the whole query
    assert split == ["a__get_price", "a__set_alarm"]


def test_the_setting_decides_when_no_decomposition_is_passed() -> None:
    index, calls = counting_index()
    query = "Set an alarm clock for seven tomorrow morning. Show the stock price of a ticker symbol."
    default = [r.tool_id for r in retrieve(query, index, deps, RetrievalSettings(method="hybrid", final_k=2))]
    retrieve(query, index, deps, RetrievalSettings(method="hybrid", final_k=2, decompose="off"))
    retrieve(query, index, deps, RetrievalSettings(method="bm25", final_k=2))
    # on by default, at sentence ends, the parts weighted by cosine (bench/HISTORY.md, "Query
    # decomposition that does no harm"); never with bm25 alone: no cosine to weigh the parts
    assert RetrievalSettings().decompose == "sentences"
    assert decomposition_of(RetrievalSettings()) == Decomposition(
        "max", level="sentences", min_content_words=4, weighting="cosine"
    )
    assert decomposition_of(RetrievalSettings()) == Decomposition()  # the defaults are the gateway's
    assert decomposition_of(RetrievalSettings(method="bm25")) is None
    assert calls == [3, 1, 1]  # whole query + both sentences; then the whole query alone, twice
    assert set(default) == {"a__set_alarm", "a__get_price"}
