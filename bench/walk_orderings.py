"""Walk orderings measured against the product's walk and not shipped (bench/HISTORY.md, "Walk
orderings a wrong first hit cannot spoil"): the lab's own walk, over the product's DFS iterator.

Each sorts the paper's sequence (``tool 1, its dependencies, tool 2, ...``) by a weight per tool (a
search hit weighs its relevance within the turn; ties keep DFS order), or keeps it and changes what
is walked or kept:

- ``order="weighted"``: a dependency weighs its parent's relevance times the confidences of the edges
  that led to it (harmful with inferred edges: a true prerequisite sinks below weaker hits).
- ``dependency_share`` < 1: a hit's dependencies weigh that share of the hit's relevance, so they follow
  the later search hits that stand almost as high as the hit itself.
- ``walk_gate``: a hit after the first is walked only when its relevance reaches the gate.
- ``hold_hits``: every search hit whose relevance reaches it keeps a place in the list; the last-placed
  other tools make room.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Literal

from toolweave.records import EdgeKind
from toolweave.retrieval.fusion import turn_relevance
from toolweave.retrieval.results import Hit, RankedTool
from toolweave.retrieval.walk import DependencyLookup, dependency_entry, walk_edges

__all__ = ["expand_with_ordering"]


def expand_with_ordering(
    hits: Sequence[Hit],
    dependencies: DependencyLookup,
    *,
    top_k: int,
    final_k: int,
    d_limit: int = 0,
    edge_kinds: Sequence[EdgeKind] | None = None,
    keep: Callable[[str], bool] | None = None,
    order: Literal["dfs", "weighted"] = "dfs",
    relevance: Mapping[str, float] | None = None,
    dependency_share: float = 1.0,
    walk_gate: float = 0.0,
    hold_hits: float | None = None,
) -> list[RankedTool]:
    """The paper's walk (``hits[:top_k]`` each followed by its dependencies; later hits fill up),
    reordered or filtered as the module's docstring says; all options at their defaults = the paper's."""
    out: list[RankedTool] = []
    weights: list[float] = []
    seen: set[str] = set()
    relevance = relevance or turn_relevance(hits)
    reorder = order == "weighted" or dependency_share < 1.0
    # a reordering or a held hit may move tools down, so it needs the whole walk before cutting
    whole = reorder or hold_hits is not None
    limit = len(hits) + final_k * (top_k + 1) if whole else final_k

    def emit(tool: RankedTool, weight: float) -> None:
        seen.add(tool.tool_id)
        out.append(tool)
        weights.append(weight)

    def emit_hit(hit: Hit) -> None:
        if hit.tool_id not in seen:
            emit(
                RankedTool(hit.tool_id, len(out) + 1, "first_pass", hit.score),
                relevance.get(hit.tool_id, 0.0),
            )

    for n, hit in enumerate(hits[:top_k]):
        if len(out) >= limit:
            break
        emit_hit(hit)
        own = relevance.get(hit.tool_id, 0.0)
        if n > 0 and own < walk_gate:
            continue
        path_weight = {hit.tool_id: own}
        for edge, depth, _w in walk_edges(hit.tool_id, dependencies, d_limit, edge_kinds, seen, keep):
            if order == "weighted":
                weight = path_weight.get(edge.tool, 0.0) * edge.confidence
                path_weight[edge.depends_on] = weight
            else:
                # a dependency that is itself a strong search hit keeps its own place
                weight = max(own * dependency_share, relevance.get(edge.depends_on, 0.0))
            emit(dependency_entry(edge, len(out) + 1, depth), weight)
    for hit in hits[top_k:]:
        if len(out) >= limit:
            break
        emit_hit(hit)
    if reorder:
        ranked = sorted(range(len(out)), key=lambda n: (-weights[n], n))
        out = [out[n] for n in ranked]
    if hold_hits is not None:
        out = _hold(out, [h.tool_id for h in hits if relevance.get(h.tool_id, 0.0) >= hold_hits], final_k)
    if whole:
        return [replace(tool, rank=rank) for rank, tool in enumerate(out[:final_k], 1)]
    return out[:final_k]


def _hold(ranked: list[RankedTool], held: Sequence[str], final_k: int) -> list[RankedTool]:
    """The first ``final_k`` of ``ranked`` with every held tool in it (the first ``final_k`` held ones
    at most): each held tool cut off takes the place of the last-placed tool that is not held. The order
    stays that of ``ranked``."""
    must = set(held[:final_k])
    chosen = ranked[:final_k]
    missing = [t for t in ranked[final_k:] if t.tool_id in must]
    for tool in missing:
        drop = next((n for n in range(len(chosen) - 1, -1, -1) if chosen[n].tool_id not in must), None)
        if drop is None:
            break
        del chosen[drop]
        chosen.append(tool)
    return chosen
