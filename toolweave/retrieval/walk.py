"""Algorithm 1 of Graph RAG-Tool Fusion: walk each first-pass tool's dependencies, depth first.

The result is ``tool 1, its dependencies (pre-order DFS), tool 2, its dependencies, ...`` with every
tool once, cut to ``final_k``. Cycles are harmless (a tool is never visited twice) and ``d_limit``
bounds the depth (1 = direct dependencies only, 0 = no limit).

``order="weighted"`` keeps that sequence but lets a dependency sink below later search hits when it is
weakly supported: a dependency weighs its parent's relevance times the confidences of the edges that
led to it, a search hit its own relevance, and the list is sorted by weight (ties keep DFS order).
With declared edges (confidence 1) nothing moves; a guessed edge of a doubtful first hit no longer
pushes a better-matching search hit out of the list.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Literal

from toolweave.records import DependencyEdge, EdgeKind
from toolweave.retrieval.fusion import turn_relevance
from toolweave.retrieval.results import Hit, RankedTool

__all__ = ["DependencyLookup", "WalkOrder", "expand_with_dependencies"]

WalkOrder = Literal["dfs", "weighted"]

DependencyLookup = Callable[[str, Sequence[EdgeKind] | None], Sequence[DependencyEdge]]
"""``dependencies(tool_id, kinds)`` → the tool's outgoing edges, in a stable order."""


def expand_with_dependencies(
    hits: Sequence[Hit],
    dependencies: DependencyLookup,
    *,
    top_k: int,
    final_k: int,
    d_limit: int = 0,
    edge_kinds: Sequence[EdgeKind] | None = None,
    keep: Callable[[str], bool] | None = None,
    order: WalkOrder = "dfs",
    relevance: Mapping[str, float] | None = None,
) -> list[RankedTool]:
    """Rank ``hits[:top_k]`` each followed by its dependency walk; fill up with later hits.

    ``keep`` filters tools that must not be returned (e.g. of an unreachable upstream): they are
    neither listed nor walked through. ``order`` is ``dfs`` (the paper's) or ``weighted`` (above);
    ``relevance`` is each hit's weight in [0, 1] (default: ``turn_relevance(hits)``).
    """
    out: list[RankedTool] = []
    weights: list[float] = []
    seen: set[str] = set()
    relevance = relevance or turn_relevance(hits)
    # the weighted order may move tools down, so it needs the whole walk before cutting
    limit = final_k if order == "dfs" else len(hits) + final_k * (top_k + 1)

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

    for hit in hits[:top_k]:
        if len(out) >= limit:
            break
        emit_hit(hit)
        path_weight = {hit.tool_id: relevance.get(hit.tool_id, 0.0)}
        for edge, depth in _walk(hit.tool_id, dependencies, d_limit, edge_kinds, seen, keep):
            weight = path_weight.get(edge.tool, 0.0) * edge.confidence
            path_weight[edge.depends_on] = weight
            emit(
                RankedTool(
                    edge.depends_on,
                    len(out) + 1,
                    "dependency",
                    edge.confidence,
                    via=edge.tool,
                    edge_kind=edge.kind,
                    parameter_name=edge.parameter_name,
                    depth=depth,
                ),
                weight,
            )
    for hit in hits[top_k:]:
        if len(out) >= limit:
            break
        emit_hit(hit)
    if order == "weighted":
        ranked = sorted(range(len(out)), key=lambda n: (-weights[n], n))
        out = [replace(out[n], rank=rank) for rank, n in enumerate(ranked[:final_k], 1)]
    return out[:final_k]


def _walk(
    root: str,
    dependencies: DependencyLookup,
    d_limit: int,
    kinds: Sequence[EdgeKind] | None,
    seen: set[str],
    keep: Callable[[str], bool] | None,
) -> Iterator[tuple[DependencyEdge, int]]:
    """Pre-order DFS without recursion (a 10k-tool chain must not hit Python's recursion limit).

    ``seen`` is shared with the caller and updated by it as edges are yielded.
    """
    stack: list[tuple[Iterator[DependencyEdge], int]] = [(iter(dependencies(root, kinds)), 1)]
    while stack:
        edges, depth = stack[-1]
        edge = next(edges, None)
        if edge is None:
            stack.pop()
            continue
        target = edge.depends_on
        if target in seen or target == root or (keep is not None and not keep(target)):
            continue
        yield edge, depth
        if d_limit == 0 or depth < d_limit:
            stack.append((iter(dependencies(target, kinds)), depth + 1))
