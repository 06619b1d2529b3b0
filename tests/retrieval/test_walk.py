"""Algorithm 1: DFS order, de-duplication, d_limit, cycles, edge kinds, filtering, fill-up."""

from __future__ import annotations

from collections.abc import Sequence

from toolweave.records import DependencyEdge, EdgeKind
from toolweave.retrieval.results import Hit
from toolweave.retrieval.walk import expand_with_dependencies

T, P = EdgeKind.TOOL_DIRECTLY_DEPENDS_ON, EdgeKind.PARAMETER_INDIRECTLY_DEPENDS_ON


def lookup(graph: dict[str, list[tuple[str, EdgeKind]]]):  # type: ignore[no-untyped-def]
    def deps(tool: str, kinds: Sequence[EdgeKind] | None) -> list[DependencyEdge]:
        return [
            DependencyEdge(tool=tool, depends_on=t, kind=k, parameter_name="p" if k == P else None)
            for t, k in graph.get(tool, [])
            if kinds is None or k in kinds
        ]

    return deps


def ids(ranked) -> list[str]:  # type: ignore[no-untyped-def]
    return [r.tool_id for r in ranked]


GRAPH = {
    "price": [("ticker", T), ("date", P)],
    "ticker": [("net", T)],
    "date": [],
    "news": [("ticker", T), ("date", T)],
}


def test_preorder_dfs_then_next_hit_without_duplicates() -> None:
    hits = [Hit("price", 0.9), Hit("news", 0.8), Hit("weather", 0.1)]
    out = expand_with_dependencies(hits, lookup(GRAPH), top_k=3, final_k=10)
    assert ids(out) == ["price", "ticker", "net", "date", "news", "weather"]
    assert [r.rank for r in out] == list(range(1, 7))
    net = out[2]
    assert (net.reason, net.via, net.depth, net.edge_kind) == ("dependency", "ticker", 2, T)
    assert out[3].parameter_name == "p"


def test_d_limit_bounds_depth() -> None:
    out = expand_with_dependencies([Hit("price", 1.0)], lookup(GRAPH), top_k=1, final_k=10, d_limit=1)
    assert ids(out) == ["price", "ticker", "date"]


def test_cycles_terminate_and_never_repeat() -> None:
    cyclic = {"a": [("b", T)], "b": [("c", T)], "c": [("a", T), ("b", T)]}
    out = expand_with_dependencies([Hit("a", 1.0), Hit("c", 0.5)], lookup(cyclic), top_k=2, final_k=10)
    assert ids(out) == ["a", "b", "c"]


def test_edge_kind_filter_and_keep_filter() -> None:
    out = expand_with_dependencies([Hit("price", 1.0)], lookup(GRAPH), top_k=1, final_k=10, edge_kinds=[P])
    assert ids(out) == ["price", "date"]
    out = expand_with_dependencies(
        [Hit("price", 1.0)], lookup(GRAPH), top_k=1, final_k=10, keep=lambda t: t != "ticker"
    )
    assert ids(out) == ["price", "date"]  # an excluded tool is not walked through either


def test_final_k_cuts_and_later_hits_fill_without_walk() -> None:
    hits = [Hit("price", 0.9), Hit("x", 0.5), Hit("news", 0.4)]
    assert ids(expand_with_dependencies(hits, lookup(GRAPH), top_k=1, final_k=3)) == [
        "price",
        "ticker",
        "net",
    ]
    # news is beyond top_k: listed, but its dependencies are not walked
    out = expand_with_dependencies(hits, lookup(GRAPH), top_k=1, final_k=10)
    assert ids(out) == ["price", "ticker", "net", "date", "x", "news"]


# -- orderings a doubtful first hit cannot spoil -----------------------------------------------------------


def test_dependency_share_defers_a_hit_s_walk_below_near_tied_hits_only() -> None:
    tied = [Hit("price", 1.0), Hit("x", 0.98), Hit("y", 0.97), Hit("z", 0.2), Hit("w", 0.0)]
    dfs = expand_with_dependencies(tied, lookup(GRAPH), top_k=1, final_k=10)
    assert ids(dfs) == ["price", "ticker", "net", "date", "x", "y", "z", "w"]
    assert expand_with_dependencies(tied, lookup(GRAPH), top_k=1, final_k=10, dependency_share=1.0) == dfs
    out = expand_with_dependencies(tied, lookup(GRAPH), top_k=1, final_k=10, dependency_share=0.9)
    # the walk stays one block in DFS order, after the hits standing within 10 % of price
    assert ids(out) == ["price", "x", "y", "ticker", "net", "date", "z", "w"]
    assert [r.rank for r in out] == list(range(1, 9))
    assert (out[3].reason, out[3].via) == ("dependency", "price")
    # a sure first pass (the next hit far below) keeps the paper's order
    sure = [Hit("price", 1.0), Hit("x", 0.5), Hit("y", 0.4), Hit("w", 0.0)]
    assert ids(expand_with_dependencies(sure, lookup(GRAPH), top_k=1, final_k=10, dependency_share=0.9)) == [
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
    out = expand_with_dependencies(hits, lookup(GRAPH), top_k=1, final_k=10, dependency_share=0.9)
    assert ids(out) == ["price", "x", "date", "ticker", "net", "w"]
    assert out[2].reason == "dependency"  # found by the walk, placed by its own relevance


def test_walk_gate_walks_only_hits_close_to_the_best_and_always_the_first() -> None:
    graph = {**GRAPH, "news": [("feed", T)]}
    hits = [Hit("price", 1.0), Hit("news", 0.4), Hit("w", 0.0)]
    walked = ["price", "ticker", "net", "date", "news", "feed", "w"]
    assert ids(expand_with_dependencies(hits, lookup(graph), top_k=2, final_k=10)) == walked
    assert ids(expand_with_dependencies(hits, lookup(graph), top_k=2, final_k=10, walk_gate=0.3)) == walked
    gated = expand_with_dependencies(hits, lookup(graph), top_k=2, final_k=10, walk_gate=0.5)
    assert ids(gated) == ["price", "ticker", "net", "date", "news", "w"]  # news listed, not walked
    first = expand_with_dependencies(
        hits, lookup(graph), top_k=2, final_k=10, walk_gate=0.5, relevance={"price": 0.1, "news": 0.05}
    )
    assert ids(first)[:4] == ["price", "ticker", "net", "date"]  # the first hit is walked whatever its score


def test_hold_hits_keeps_strong_hits_in_the_list_in_place_of_the_last_dependencies() -> None:
    hits = [Hit("price", 1.0), Hit("x", 0.95), Hit("y", 0.5), Hit("w", 0.0)]
    dfs = expand_with_dependencies(hits, lookup(GRAPH), top_k=1, final_k=4)
    assert ids(dfs) == ["price", "ticker", "net", "date"]  # the walk pushed x (almost tied) out
    held = expand_with_dependencies(hits, lookup(GRAPH), top_k=1, final_k=4, hold_hits=0.9)
    assert ids(held) == ["price", "ticker", "net", "x"]
    assert [r.rank for r in held] == [1, 2, 3, 4]
    assert ids(expand_with_dependencies(hits, lookup(GRAPH), top_k=1, final_k=4, hold_hits=0.4)) == [
        "price",
        "ticker",
        "x",
        "y",
    ]
    # at most final_k tools are held, the first-pass leaders
    assert ids(expand_with_dependencies(hits, lookup(GRAPH), top_k=1, final_k=2, hold_hits=0.0)) == [
        "price",
        "x",
    ]
    # nothing to hold when the walk leaves room: the paper's list, ranks included
    roomy = expand_with_dependencies(hits, lookup(GRAPH), top_k=1, final_k=10)
    assert expand_with_dependencies(hits, lookup(GRAPH), top_k=1, final_k=10, hold_hits=0.9) == roomy
