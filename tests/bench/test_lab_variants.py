"""The lab's measured variants (``bench/fusion_variants.py``, ``bench/walk_orderings.py``): not shipped,
but the figures in bench/HISTORY.md rest on them, so they must compute what they say."""

from __future__ import annotations

from dataclasses import replace

import pytest
from fusion_variants import RRF_K, convex_fusion, peak_fusion, rrf_fusion, weighted_zscore_fusion
from walk_orderings import expand_with_ordering

from tests.retrieval.test_walk import GRAPH, T, edge, ids, lookup, walk
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
    """The product's walk with a lab policy, given the turn as ``walk_variants.walker`` gives it."""
    from walk_variants import LabPolicy

    from tests.retrieval.test_walk import walk

    described = {r.id: r for r in records}
    if isinstance(policy, LabPolicy):  # a lab policy reads the records and the request itself
        schema_of = lambda t: described[t].input_schema if t in described else None  # noqa: E731
        policy = replace(policy, describe=described.get, request=request, schema_of=schema_of)
    return walk(hits, edges, policy)


def _supplied_walk(hits, edges, schemas, request, policy):
    from walk_variants import LabPolicy

    from tests.retrieval.test_walk import walk

    schema_of = lambda t: {"type": "object", "properties": schemas.get(t, {})}  # noqa: E731
    assert isinstance(policy, LabPolicy)
    return walk(hits, edges, replace(policy, request=request, schema_of=schema_of))


SCHEMAS = {
    "details": {
        "order_id": {"type": "string"},
        "region": {"type": "string", "enum": ["eu", "north_america"]},
    },
    "place_order": {"item": {"type": "string"}},
    "regions": {},
    "send": {"to": {"type": "string", "format": "email"}},
    "validate_email": {"email": {"type": "string"}},
    "interest": {"principal": {"type": "number"}},
    "balance": {"account": {"type": "string"}},
}
EDGES = [
    edge("details", "place_order", "order_id"),
    edge("details", "regions", "region"),
    edge("send", "validate_email", "to"),
    edge("interest", "balance", "principal"),
]


def test_the_producer_of_a_value_the_request_holds_is_not_walked_one_it_lacks_is() -> None:
    from walk_variants import LabPolicy

    skip = LabPolicy(supplied=0.0)
    hits = [Hit("details", 1.0), Hit("z", 0.0)]
    # "my last order" holds no id: the tool that gives one is needed; "ORD-1193" is one
    assert _supplied_walk(hits, EDGES, SCHEMAS, "details of my last order", skip) == [
        "details",
        "place_order",
        "regions",
        "z",
    ]
    assert _supplied_walk(hits, EDGES, SCHEMAS, "details of order ORD-1193 in North America", skip) == [
        "details",
        "z",
    ]
    # off (the lab's default, the product's walk) or without the request, the walk is the shipped one
    shipped = ["details", "place_order", "regions", "z"]
    assert _supplied_walk(hits, EDGES, SCHEMAS, "details of order ORD-1193", LabPolicy()) == shipped
    assert walk(hits, EDGES) == shipped
    assert _supplied_walk(hits, EDGES, SCHEMAS, "", skip) == shipped


def test_a_supplied_producer_down_weighted_goes_below_the_hits_that_stand_above_it() -> None:
    from walk_variants import LabPolicy

    half = LabPolicy(supplied=0.5)
    hits = [Hit("details", 1.0), Hit("near", 0.8), Hit("far", 0.3)]
    assert _supplied_walk(hits, EDGES, SCHEMAS, "details of order ORD-1193", half) == [
        "details",
        "regions",
        "near",
        "place_order",
        "far",
    ]


def test_a_converter_or_validator_of_the_value_is_walked_even_when_the_request_holds_it() -> None:
    from walk_variants import LabPolicy

    hits = [Hit("send", 1.0)]
    request = "mail bob@example.com the minutes"
    assert _supplied_walk(hits, EDGES, SCHEMAS, request, LabPolicy(supplied=0.0)) == [
        "send",
        "validate_email",
    ]
    no_exemption = LabPolicy(supplied=0.0, supplied_converters=False)
    assert _supplied_walk(hits, EDGES, SCHEMAS, request, no_exemption) == ["send"]


def test_a_number_spares_its_producer_as_the_number_rule_says() -> None:
    from labs.supplied import NumberRule
    from walk_variants import LabPolicy

    hits = [Hit("interest", 1.0)]
    named = "the interest on a principal of 5000"
    unnamed = "the interest on it, then add 5"
    rules: tuple[tuple[NumberRule, bool, bool], ...] = (
        ("off", True, True),
        ("named", False, True),
        ("any", False, False),
    )
    for rule, on_named, on_unnamed in rules:
        policy = LabPolicy(supplied=0.0, supplied_numbers=rule)
        walked = [
            "balance" in _supplied_walk(hits, EDGES, SCHEMAS, text, policy) for text in (named, unnamed)
        ]
        assert walked == [on_named, on_unnamed], rule


def test_learned_edges_and_tool_level_edges_under_the_request_value_rule() -> None:
    from walk_variants import LabPolicy

    learned = EDGES[0].model_copy(update={"origin": "learned", "confidence": 0.95})
    tool_level = edge("details", "login")
    hits = [Hit("details", 1.0)]
    text = "details of order ORD-1193"
    assert _supplied_walk(hits, [learned, tool_level], SCHEMAS, text, LabPolicy(supplied=0.0)) == [
        "details",
        "login",
    ]
    keep_learned = LabPolicy(supplied=0.0, supplied_learned=False)
    assert _supplied_walk(hits, [learned, tool_level], SCHEMAS, text, keep_learned) == [
        "details",
        "login",
        "place_order",  # weighs its confidence, 0.95
    ]


def test_the_request_value_rule_reads_each_tools_schema_from_the_records() -> None:
    # the grid's walker gives the rule the recorded tools' schemas: an email the request holds spares
    # the tool that would give one, a validator of it is still walked
    from walk_variants import LabPolicy

    from toolweave.records import EdgeKind, ToolRecord

    def tool(tool_id: str, **params: dict[str, str]) -> ToolRecord:
        schema = {"type": "object", "properties": params}
        return ToolRecord(id=tool_id, source="s", name=tool_id, input_schema=schema)

    records = [
        tool("details", order_id={"type": "string"}),
        tool("place_order", item={"type": "string"}),
        tool("send", to={"type": "string", "format": "email"}),
        tool("validate_email", email={"type": "string"}),
        tool("contacts", name={"type": "string"}),
    ]
    d = EdgeKind.PARAMETER_DIRECTLY_DEPENDS_ON
    edges = [
        DependencyEdge(tool="details", depends_on="place_order", kind=d, parameter_name="order_id"),
        DependencyEdge(tool="send", depends_on="validate_email", kind=d, parameter_name="to"),
        DependencyEdge(tool="send", depends_on="contacts", kind=d, parameter_name="to"),
    ]
    skip = LabPolicy(supplied=0.0)
    hits = [Hit("details", 1.0)]
    assert _lab_walk(hits, edges, skip, records, "details of my last order") == ["details", "place_order"]
    assert _lab_walk(hits, edges, skip, records, "details of order ORD-1193") == ["details"]
    mail = "mail bob@example.com the minutes"
    assert _lab_walk([Hit("send", 1.0)], edges, skip, records, mail) == ["send", "validate_email"]
    off = _lab_walk([Hit("send", 1.0)], edges, LabPolicy(), records, mail)
    assert off == ["send", "validate_email", "contacts"]  # the rule off: the shipped walk, 1/2 each


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


def test_lab_variant_of_a_path_cut_stops_a_chain_of_inferred_edges() -> None:
    # 0.97, 0.94, 0.91, 0.885: the product walks the whole chain; a path cut of 0.9 stops before the last
    from walk_variants import LabPolicy

    chain = [edge(a, b, "x", 0.97) for a, b in ("ab", "bc", "cd", "de")]
    assert walk([Hit("a", 1.0)], chain) == ["a", "b", "c", "d", "e"]
    assert walk([Hit("a", 1.0)], chain, LabPolicy()) == ["a", "b", "c", "d", "e"]
    assert walk([Hit("a", 1.0)], chain, LabPolicy(min_confidence=0.9)) == ["a", "b", "c", "d"]
