"""Algorithm 1: DFS order, de-duplication, d_limit, cycles, edge kinds, filtering, fill-up; and which
edges the walk follows (content parameters, alternative producers, weights)."""

from __future__ import annotations

from collections.abc import Sequence

from toolweave.records import DependencyEdge, EdgeKind
from toolweave.retrieval.results import Hit
from toolweave.retrieval.walk import WalkPolicy, expand_with_dependencies

T, P = EdgeKind.TOOL_DIRECTLY_DEPENDS_ON, EdgeKind.PARAMETER_INDIRECTLY_DEPENDS_ON


def lookup(graph: dict[str, list[tuple[str, EdgeKind]]]):
    def deps(tool: str, kinds: Sequence[EdgeKind] | None) -> list[DependencyEdge]:
        return [
            DependencyEdge(tool=tool, depends_on=t, kind=k, parameter_name="p" if k == P else None)
            for t, k in graph.get(tool, [])
            if kinds is None or k in kinds
        ]

    return deps


def ids(ranked) -> list[str]:
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


# -- which dependencies the walk takes, and where -------------------------------------------------------

PD, PI = EdgeKind.PARAMETER_DIRECTLY_DEPENDS_ON, EdgeKind.PARAMETER_INDIRECTLY_DEPENDS_ON


def edge(consumer: str, producer: str, param: str | None = None, confidence: float = 1.0, kind=None):
    """A declared edge, or an inferred one when it is less than sure."""
    kind = kind or (PD if param else T)
    origin = "declared" if confidence == 1.0 else "inferred"
    return DependencyEdge(
        tool=consumer,
        depends_on=producer,
        kind=kind,
        parameter_name=param,
        confidence=confidence,
        origin=origin,
    )


def walk(hits, edges, policy=None, final_k=10, top_k=1):
    """The walk's tool ids, each hit weighing its score (the tests give scores in [0, 1])."""
    by_tool: dict[str, list[DependencyEdge]] = {}
    for e in edges:
        by_tool.setdefault(e.tool, []).append(e)
    relevance = {h.tool_id: h.score for h in hits}
    return ids(
        expand_with_dependencies(
            hits,
            lambda t, _k: by_tool.get(t, []),
            top_k=top_k,
            final_k=final_k,
            relevance=relevance,
            policy=policy,
        )
    )


def test_a_declared_prerequisite_follows_the_tool_that_needs_it_as_in_the_paper() -> None:
    edges = [edge("alarm", "token", "token"), edge("token", "net")]
    hits = [Hit("alarm", 1.0), Hit("clock", 0.95), Hit("z", 0.0)]
    assert walk(hits, edges) == ["alarm", "token", "net", "clock", "z"]
    assert walk(hits, edges, WalkPolicy.everything()) == ["alarm", "token", "net", "clock", "z"]


def test_a_tool_fed_by_many_producers_pulls_none_of_them_in() -> None:
    # a calculator fed, in different requests, by six tools: each weighs 1/6 of it, below the bar;
    # the one the request names is listed anyway, as a search hit
    edges = [edge("total", f"feeder{n}", "amount") for n in range(6)]
    hits = [Hit("total", 1.0), Hit("feeder4", 0.5), Hit("x", 0.1), Hit("y", 0.0)]
    assert walk(hits, edges) == ["total", "feeder4", "x", "y"]
    assert len(walk(hits, edges, WalkPolicy.everything())) == 9  # the paper's walk takes all six
    # two alternatives weigh half each: walked, after the hits that stand above half the parent
    two = [edge("total", "a", "amount"), edge("total", "b", "amount")]
    assert walk([Hit("total", 1.0), Hit("near", 0.6), Hit("far", 0.3)], two) == [
        "total",
        "near",
        "a",
        "b",
        "far",
    ]
    # a direct producer and an indirect converter of one parameter are no alternatives
    both = [edge("total", "source", "amount"), edge("total", "convert", "amount", kind=PI)]
    assert walk([Hit("total", 1.0)], both) == ["total", "source", "convert"]


def test_a_parameter_a_listed_tool_already_gives_needs_no_other_producer() -> None:
    edges = [edge("a", "p1", "x"), edge("b", "p1", "x"), edge("b", "p2", "x")]
    hits = [Hit("a", 1.0), Hit("b", 0.9), Hit("z", 0.0)]
    assert walk(hits, edges, top_k=2) == ["a", "p1", "b", "z"]
    assert walk(hits, edges, WalkPolicy.everything(), top_k=2) == ["a", "p1", "b", "p2", "z"]


def test_confidence_and_parent_relevance_weigh_and_place_a_dependency() -> None:
    doubtful = [edge("top", "login", "token", confidence=0.92)]
    tied = [Hit("top", 1.0), Hit("near", 0.95), Hit("below", 0.5), Hit("z", 0.0)]
    # 1 × 0.92: after the hit that stands above it, before the ones below
    assert walk(tied, doubtful) == ["top", "near", "login", "below", "z"]
    # a weak parent's dependency weighs too little to be walked (0.3 × 1 < 0.4)
    weak = [edge("second", "its_dep", "y")]
    hits = [Hit("top", 1.0), Hit("second", 0.3), Hit("z", 0.0)]
    assert walk(hits, weak, top_k=2) == ["top", "second", "z"]
    assert walk(hits, weak, WalkPolicy.everything(), top_k=2) == ["top", "second", "its_dep", "z"]
    # a dependency that is itself a strong hit keeps its own place (0.99, not 1 × 0.92)
    own = [edge("top", "near", "x", confidence=0.92)]
    strong = [Hit("top", 1.0), Hit("near", 0.99), Hit("mid", 0.95), Hit("z", 0.0)]
    assert walk(strong, own) == ["top", "near", "mid", "z"]


def test_an_inferred_edge_is_walked_by_its_weight_not_cut_at_a_bar() -> None:
    chain = [edge("a", "b", "x", 0.97), edge("b", "c", "y", 0.97), edge("c", "d", "z", 0.97)]
    # 0.97, 0.94, 0.91, 0.885: every hop weighs enough (no path cut: the lab's ``min_confidence``)
    assert walk([Hit("a", 1.0)], [*chain, edge("d", "e", "w", 0.97)]) == ["a", "b", "c", "d", "e"]
    # a rule no second source confirmed (1/3): walked from a clear hit, after the hits that stand above it
    guess = [edge("a", "clock", "when", 0.333)]
    hits = [Hit("a", 1.0), Hit("b", 0.6), Hit("c", 0.3), Hit("z", 0.0)]
    assert walk(hits, guess) == ["a", "b", "clock", "c", "z"]
    # ...not from a weak one (0.5 x 0.333 < 0.2), nor past a weak guess (0.333 x 0.333 < 0.2)
    weak = [edge("b", "clock", "when", 0.333)]
    assert walk(hits, weak, top_k=2) == ["a", "b", "c", "z"]
    two = [*guess, edge("clock", "zone", "tz", 0.333)]
    assert walk(hits, two) == ["a", "b", "clock", "c", "z"]
    # declared, manifest and learned edges keep their own floor (0.4): someone's word, or traffic's
    hits = [Hit("a", 1.0), Hit("b", 0.6), Hit("c", 0.3)]
    said = [edge("a", "login", None, 0.35)]  # inferred
    assert walk(hits, said) == ["a", "b", "login", "c"]
    for origin in ("declared", "manifest", "learned"):
        assert walk(hits, [said[0].model_copy(update={"origin": origin})]) == ["a", "b", "c"], origin
        placed = [said[0].model_copy(update={"origin": origin, "confidence": 0.5})]
        assert walk(hits, placed) == ["a", "b", "login", "c"], origin


def test_the_producer_of_a_content_parameter_is_not_walked() -> None:
    # "find reviews of the Dyson Airwrap" says what to search: a tool that could produce a search
    # keyword (a book search, in NESTFUL's graph) is not needed; an id the request cannot give still is
    edges = [
        edge("reviews", "book_search", "search_keywords"),
        edge("reviews", "book_search2", "queryText"),
        edge("reviews", "product_search", "product_id"),
    ]
    hits = [Hit("reviews", 1.0), Hit("z", 0.0)]
    assert walk(hits, edges) == ["reviews", "product_search", "z"]
    assert walk(hits, edges, WalkPolicy(skip_content=False)) == [
        "reviews",
        "book_search",
        "book_search2",
        "product_search",
        "z",
    ]
    # traffic saw the value come from the producer: a learned edge is walked whatever its parameter
    learned = edges[0].model_copy(update={"origin": "learned", "confidence": 0.95})
    assert walk(hits, [learned]) == ["reviews", "book_search", "z"]
