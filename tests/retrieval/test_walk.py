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
