"""Relevance floor: weak hits dropped, the best kept, destructive tools held to a stronger match."""

from __future__ import annotations

from toolweave.records import EdgeKind
from toolweave.retrieval.floor import apply_floor, mark_published
from toolweave.retrieval.results import Hit, RankedTool

HITS = [Hit("best", 10.0), Hit("good", 8.0), Hit("meh", 4.0), Hit("weak", 1.0), Hit("worst", 0.0)]
COSINE = {"best": 0.7, "good": 0.6, "meh": 0.5, "weak": 0.15, "worst": 0.1}


def ids(hits: list[Hit]) -> list[str]:
    return [h.tool_id for h in hits]


def test_floor_relative_to_the_turns_best_hit() -> None:
    assert ids(apply_floor(HITS, COSINE, relative=0.0)) == ids(HITS)  # off
    assert ids(apply_floor(HITS, COSINE, relative=0.35)) == ["best", "good", "meh"]
    assert ids(apply_floor(HITS, COSINE, relative=0.9)) == ["best"]


def test_absolute_floor_on_cosine_similarity() -> None:
    assert ids(apply_floor(HITS, COSINE, relative=0.0, absolute=0.55)) == ["best", "good"]
    # a tool the vector side did not list is judged by the weakest listed similarity
    assert ids(apply_floor([*HITS[:2], Hit("bm25-only", 9.0)], {"best": 0.7, "good": 0.6}, relative=0.0,
                           absolute=0.55)) == ["best", "good", "bm25-only"]  # fmt: skip


def test_the_best_hit_stays_even_below_every_floor() -> None:
    assert ids(apply_floor(HITS, {"best": 0.01}, relative=0.9, absolute=0.9)) == ["best"]
    assert apply_floor([], {}, relative=0.5) == []


def test_a_tiny_fleet_is_published_whole() -> None:
    # two time tools: the weaker one is the turn's weakest candidate (relevance 0), yet relevant
    two = [Hit("convert_time", 2.0), Hit("get_current_time", 1.0)]
    assert ids(apply_floor(two, {"convert_time": 0.5, "get_current_time": 0.45}, relative=0.3)) == ids(two)


def test_destructive_tools_need_a_stronger_match() -> None:
    def destructive(tool_id: str) -> bool:
        return tool_id in {"good", "meh"}

    kept = apply_floor(HITS, COSINE, relative=0.35, destructive_extra=0.3, is_destructive=destructive)
    assert ids(kept) == ["best", "good"]  # good: 0.8 >= 0.65; meh: 0.4 < 0.65 though >= 0.35


def test_dependencies_are_published_with_the_hit_their_walk_started_from() -> None:
    kind = EdgeKind.TOOL_DIRECTLY_DEPENDS_ON
    ranked = [
        RankedTool("best", 1, "first_pass", 10.0),
        RankedTool("login", 2, "dependency", 1.0, via="best", edge_kind=kind),
        RankedTool("token", 3, "dependency", 1.0, via="login", edge_kind=kind, depth=2),
        RankedTool("weak", 4, "first_pass", 1.0),
        RankedTool("weak_dep", 5, "dependency", 1.0, via="weak", edge_kind=kind),
    ]
    marked = mark_published(ranked, [Hit("best", 10.0)])
    assert [r.tool_id for r in marked] == [r.tool_id for r in ranked]
    assert [r.tool_id for r in marked if r.publish] == ["best", "login", "token"]
