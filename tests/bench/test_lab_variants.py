"""The lab's measured variants (``bench/fusion_variants.py``, ``bench/walk_orderings.py``): not shipped,
but the figures in bench/HISTORY.md rest on them, so they must compute what they say."""

from __future__ import annotations

import pytest
from fusion_variants import RRF_K, convex_fusion, peak_fusion, rrf_fusion, weighted_zscore_fusion
from walk_orderings import expand_with_ordering

from tests.retrieval.test_walk import GRAPH, T, ids, lookup
from toolweave.records import DependencyEdge
from toolweave.retrieval.fusion import zscore_fusion
from toolweave.retrieval.results import Hit
from toolweave.retrieval.walk import WalkPolicy


def test_convex_fusion_at_the_papers_alpha_buries_a_clear_bm25_winner_zscores_find() -> None:
    vector = [Hit(f"v{n}", 0.60 - n * 0.01) for n in range(30)]
    vector[15] = Hit("win", vector[15].score)
    text = [Hit("win", 40.0), *(Hit(f"t{n}", 10.0 - n * 0.2) for n in range(29))]
    assert zscore_fusion(vector, text)[0].tool_id == "win"
    assert convex_fusion(vector, text, alpha=0.8)[0].tool_id == "v0"


def test_convex_fusion_normalises_each_list() -> None:
    vector = [Hit("a", 0.9), Hit("b", 0.7), Hit("c", 0.1)]
    text = [Hit("c", 30.0), Hit("b", 20.0), Hit("d", 10.0)]
    fused = convex_fusion(vector, text, alpha=0.6)
    scores = {h.tool_id: h.score for h in fused}
    assert scores["a"] == pytest.approx(0.6)  # vector 1.0 * 0.6, absent from text
    assert scores["b"] == pytest.approx(0.6 * 0.75 + 0.4 * 0.5)
    assert scores["c"] == pytest.approx(0.4)
    assert scores["d"] == pytest.approx(0.0)
    assert [h.tool_id for h in fused] == ["b", "a", "c", "d"]
    assert [h.tool_id for h in convex_fusion(vector, text, alpha=1.0)][:3] == ["a", "b", "c"]
    tied = convex_fusion([Hit("x", 1.0)], [Hit("y", 1.0)], alpha=0.5)
    assert [h.tool_id for h in tied] == ["x", "y"]  # ties keep first-seen order
    assert convex_fusion(vector, text, alpha=0.0)[0].tool_id == "c"


def test_rrf_rewards_agreement_between_lists() -> None:
    vector = [Hit("a", 0.9), Hit("b", 0.8)]
    text = [Hit("b", 12.0), Hit("c", 3.0)]
    fused = rrf_fusion(vector, text)
    assert [h.tool_id for h in fused] == ["b", "a", "c"]
    assert fused[0].score == pytest.approx(1 / (RRF_K + 2) + 1 / (RRF_K + 1))


def _multi_part_request() -> tuple[list[Hit], list[Hit]]:
    """A three-part request: BM25 matches each part's words and three leaders stand out of its list;
    the one embedding of the whole request found a fairly good single tool and little else."""
    text = [Hit("part1", 9.0), Hit("part2", 8.5), Hit("part3", 8.0)]
    text += [Hit(f"t{n}", 2.0 - n * 0.05) for n in range(27)]
    vector = [Hit("blurred", 0.54), Hit("v0", 0.50), Hit("v1", 0.49)]
    vector += [Hit(f"v{n}", 0.48 - n * 0.002) for n in range(2, 25)]
    vector += [Hit("part1", 0.40), Hit("part2", 0.399), Hit("part3", 0.398)]
    return vector, text


def test_peak_fusion_trusts_the_list_whose_leaders_stand_out() -> None:
    vector, text = _multi_part_request()
    # equal weights: the vector side's lone leader comes first
    assert zscore_fusion(vector, text)[0].tool_id == "blurred"
    # weighted by peak (mean z of each list's top 3), BM25's three leaders come first
    assert [h.tool_id for h in peak_fusion(vector, text)][:3] == ["part1", "part2", "part3"]
    # the first hit alone (top_n 1) sees one outlier in each list and trusts the vector side's more
    assert peak_fusion(vector, text, top_n=1)[0].tool_id == "blurred"


def test_peak_fusion_reduces_to_zscore_fusion_without_peaks_or_power() -> None:
    vector, text = _multi_part_request()
    assert peak_fusion(vector, text, power=0.0) == zscore_fusion(vector, text)
    flat_vector = [Hit("a", 0.5), Hit("b", 0.5)]
    flat_text = [Hit("b", 3.0), Hit("c", 3.0)]
    assert peak_fusion(flat_vector, flat_text) == zscore_fusion(flat_vector, flat_text)  # no peak: equal
    assert [h.tool_id for h in peak_fusion([Hit("only", 0.4)], [])] == ["only"]
    assert peak_fusion([], []) == []


def test_weighted_zscore_fusion_weighs_the_bm25_side() -> None:
    vector = [Hit("a", 0.9), Hit("b", 0.5), Hit("c", 0.1)]
    text = [Hit("c", 9.0), Hit("b", 5.0), Hit("a", 1.0)]
    assert weighted_zscore_fusion(vector, text, text_weight=1.0) == zscore_fusion(vector, text)
    assert weighted_zscore_fusion(vector, text, text_weight=2.0)[0].tool_id == "c"
    assert weighted_zscore_fusion(vector, text, text_weight=0.5)[0].tool_id == "a"


def test_dependency_share_defers_a_hit_s_walk_below_near_tied_hits_only() -> None:
    tied = [Hit("price", 1.0), Hit("x", 0.98), Hit("y", 0.97), Hit("z", 0.2), Hit("w", 0.0)]
    dfs = expand_with_ordering(tied, lookup(GRAPH), top_k=1, final_k=10)
    assert ids(dfs) == ["price", "ticker", "net", "date", "x", "y", "z", "w"]
    assert expand_with_ordering(tied, lookup(GRAPH), top_k=1, final_k=10, dependency_share=1.0) == dfs
    out = expand_with_ordering(tied, lookup(GRAPH), top_k=1, final_k=10, dependency_share=0.9)
    # the walk stays one block in DFS order, after the hits standing within 10 % of price
    assert ids(out) == ["price", "x", "y", "ticker", "net", "date", "z", "w"]
    assert [r.rank for r in out] == list(range(1, 9))
    assert (out[3].reason, out[3].via) == ("dependency", "price")
    # a sure first pass (the next hit far below) keeps the paper's order
    sure = [Hit("price", 1.0), Hit("x", 0.5), Hit("y", 0.4), Hit("w", 0.0)]
    assert ids(expand_with_ordering(sure, lookup(GRAPH), top_k=1, final_k=10, dependency_share=0.9)) == [
        "price",
        "ticker",
        "net",
        "date",
        "x",
        "y",
        "w",
    ]


def test_dependency_share_keeps_a_dependency_that_is_itself_a_strong_hit_at_its_own_place() -> None:
    hits = [Hit("price", 1.0), Hit("x", 0.96), Hit("date", 0.95), Hit("w", 0.0)]
    out = expand_with_ordering(hits, lookup(GRAPH), top_k=1, final_k=10, dependency_share=0.9)
    assert ids(out) == ["price", "x", "date", "ticker", "net", "w"]
    assert out[2].reason == "dependency"  # found by the walk, placed by its own relevance


def test_walk_gate_walks_only_hits_close_to_the_best_and_always_the_first() -> None:
    graph = {**GRAPH, "news": [("feed", T)]}
    hits = [Hit("price", 1.0), Hit("news", 0.4), Hit("w", 0.0)]
    walked = ["price", "ticker", "net", "date", "news", "feed", "w"]
    assert ids(expand_with_ordering(hits, lookup(graph), top_k=2, final_k=10)) == walked
    assert ids(expand_with_ordering(hits, lookup(graph), top_k=2, final_k=10, walk_gate=0.3)) == walked
    gated = expand_with_ordering(hits, lookup(graph), top_k=2, final_k=10, walk_gate=0.5)
    assert ids(gated) == ["price", "ticker", "net", "date", "news", "w"]  # news listed, not walked
    first = expand_with_ordering(
        hits, lookup(graph), top_k=2, final_k=10, walk_gate=0.5, relevance={"price": 0.1, "news": 0.05}
    )
    assert ids(first)[:4] == ["price", "ticker", "net", "date"]  # the first hit is walked whatever its score


def test_hold_hits_keeps_strong_hits_in_the_list_in_place_of_the_last_dependencies() -> None:
    hits = [Hit("price", 1.0), Hit("x", 0.95), Hit("y", 0.5), Hit("w", 0.0)]
    dfs = expand_with_ordering(hits, lookup(GRAPH), top_k=1, final_k=4)
    assert ids(dfs) == ["price", "ticker", "net", "date"]  # the walk pushed x (almost tied) out
    held = expand_with_ordering(hits, lookup(GRAPH), top_k=1, final_k=4, hold_hits=0.9)
    assert ids(held) == ["price", "ticker", "net", "x"]
    assert [r.rank for r in held] == [1, 2, 3, 4]
    assert ids(expand_with_ordering(hits, lookup(GRAPH), top_k=1, final_k=4, hold_hits=0.4)) == [
        "price",
        "ticker",
        "x",
        "y",
    ]
    # at most final_k tools are held, the first-pass leaders
    assert ids(expand_with_ordering(hits, lookup(GRAPH), top_k=1, final_k=2, hold_hits=0.0)) == [
        "price",
        "x",
    ]
    # nothing to hold when the walk leaves room: the paper's list, ranks included
    roomy = expand_with_ordering(hits, lookup(GRAPH), top_k=1, final_k=10)
    assert expand_with_ordering(hits, lookup(GRAPH), top_k=1, final_k=10, hold_hits=0.9) == roomy


def test_weighted_walk_order_sinks_doubtful_dependencies_only() -> None:
    doubtful = {"alarm": [DependencyEdge(tool="alarm", depends_on="net", kind=T, confidence=0.2)]}
    sure = {"alarm": [DependencyEdge(tool="alarm", depends_on="net", kind=T)]}
    hits = [Hit("alarm", 1.0), Hit("price", 0.9), Hit("x", 0.0)]
    dfs = expand_with_ordering(hits, lambda t, _k: doubtful.get(t, []), top_k=1, final_k=4)
    weighted = expand_with_ordering(
        hits, lambda t, _k: doubtful.get(t, []), top_k=1, final_k=4, order="weighted"
    )
    assert ids(dfs) == ["alarm", "net", "price", "x"]
    assert ids(weighted) == ["alarm", "price", "net", "x"]
    assert [r.rank for r in weighted] == [1, 2, 3, 4]
    # declared edges (confidence 1) keep the paper's order exactly
    paper = expand_with_ordering(hits, lambda t, _k: sure.get(t, []), top_k=1, final_k=4)
    assert (
        expand_with_ordering(hits, lambda t, _k: sure.get(t, []), top_k=1, final_k=4, order="weighted")
        == paper
    )


def _lab_walk(
    hits: list[Hit], edges: list[DependencyEdge], policy: WalkPolicy, records=(), request=""
) -> list[str]:
    from dataclasses import replace

    from walk_variants import LabPolicy

    from tests.retrieval.test_walk import walk

    described = {r.id: r for r in records}
    if isinstance(policy, LabPolicy):  # a lab policy reads the records itself
        policy = replace(policy, describe=described.get)
    schema_of = lambda t: described[t].input_schema if t in described else None  # noqa: E731
    return walk(hits, edges, policy, request=request, schema_of=schema_of)


def test_the_lab_chooser_applies_the_products_request_value_rule() -> None:
    # the lab's chooser (placements, producers per parameter) must walk what the product's walks when
    # only the request-value rule is on, or the grid's rows are not the product's
    from walk_variants import LabPolicy

    from toolweave.records import EdgeKind, ToolRecord
    from toolweave.retrieval.walk import WalkPolicy

    def tool(tool_id: str, **params: dict[str, str]) -> ToolRecord:
        schema = {"type": "object", "properties": params}
        return ToolRecord(id=tool_id, source="s", name=tool_id, input_schema=schema)

    records = [
        tool("details", order_id={"type": "string"}),
        tool("place_order", item={"type": "string"}),
        tool("send", to={"type": "string", "format": "email"}),
        tool("validate_email", email={"type": "string"}),
    ]
    d = EdgeKind.PARAMETER_DIRECTLY_DEPENDS_ON
    edges = [
        DependencyEdge(tool="details", depends_on="place_order", kind=d, parameter_name="order_id"),
        DependencyEdge(tool="send", depends_on="validate_email", kind=d, parameter_name="to"),
    ]
    for factor in (0.0, 0.5):
        lab, product = LabPolicy(supplied=factor), WalkPolicy(supplied=factor)
        for hit, text in (
            ("details", "details of my last order"),
            ("details", "details of order ORD-1193"),
            ("send", "mail bob@example.com the minutes"),
        ):
            hits = [Hit(hit, 1.0), Hit("near", 0.8), Hit("z", 0.0)]
            assert _lab_walk(hits, edges, lab, records, text) == _lab_walk(
                hits, edges, product, records, text
            )
    skip = LabPolicy(supplied=0.0)
    assert _lab_walk([Hit("details", 1.0)], edges, skip, records, "details of order ORD-1193") == ["details"]


def test_lab_variant_of_many_producers_of_one_parameter_only_the_best_few_are_walked() -> None:
    from walk_variants import LabPolicy

    from toolweave.records import EdgeKind

    d = EdgeKind.PARAMETER_DIRECTLY_DEPENDS_ON
    edges = [
        DependencyEdge(tool="total", depends_on=f"f{n}", kind=d, parameter_name="amount", confidence=c)
        for n, c in enumerate((0.95, 0.99, 0.97))
    ]
    hits = [Hit("total", 1.0), Hit("x", 0.1)]
    best = LabPolicy(producers_per_parameter=1, alternatives_power=0.0, placement="after_parent")
    assert _lab_walk(hits, edges, best) == ["total", "f1", "x"]  # the surest: nothing else tells them apart
    hits = [Hit("total", 1.0), Hit("f2", 0.2), Hit("x", 0.1)]
    assert _lab_walk(hits, edges, best) == ["total", "f2", "x"]  # the one the request matches comes first
