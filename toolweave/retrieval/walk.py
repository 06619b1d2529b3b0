"""Algorithm 1 of Graph RAG-Tool Fusion: walk each first-pass tool's dependencies, depth first.

The result is ``tool 1, its dependencies (pre-order DFS), tool 2, its dependencies, ...`` with every
tool once, cut to ``final_k``. Cycles are harmless (a tool is never visited twice) and ``d_limit``
bounds the depth (1 = direct dependencies only, 0 = no limit).

Two ways to keep that sequence but let dependencies sink below later search hits, both sorting the list
by a weight per tool (a search hit weighs its relevance within the turn; ties keep DFS order):

- ``order="weighted"``: a dependency weighs its parent's relevance times the confidences of the edges
  that led to it. With declared edges (confidence 1) nothing moves.
- ``dependency_share`` < 1: a hit's dependencies (its whole walk, kept together in DFS order) weigh that
  share of the hit's relevance, so they follow the later search hits that stand almost as high as the
  hit itself. When the first pass is sure (the next hits far below the first) nothing moves; when its
  leaders are nearly tied, a possibly wrong first hit's dependencies no longer push them out. 1 = DFS.

``walk_gate`` walks the dependencies of a hit after the first only when its relevance reaches the gate
(an adaptive k: 0 = every one of the ``top_k`` hits is walked). ``hold_hits`` keeps the order but
guarantees every search hit whose relevance reaches it a place in the list: when the walk would push
such a hit out, the last-placed other tools make room (None = off).

The pipeline walks in DFS order (``weighted`` on request). The three other options were measured as
guards against a wrong first hit and none earned a place (bench/RESULTS.md, "Walk orderings"); they
stay here so the lab and held-out runs measure this very function.
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
    dependency_share: float = 1.0,
    walk_gate: float = 0.0,
    hold_hits: float | None = None,
) -> list[RankedTool]:
    """Rank ``hits[:top_k]`` each followed by its dependency walk; fill up with later hits.

    ``keep`` filters tools that must not be returned (e.g. of an unreachable upstream): they are
    neither listed nor walked through. ``order`` is ``dfs`` (the paper's) or ``weighted``;
    ``dependency_share``, ``walk_gate`` and ``hold_hits`` as in the module's docstring (1, 0 and None:
    the paper's walk);
    ``relevance`` is each hit's weight in [0, 1] (default: ``turn_relevance(hits)``).
    """
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
        for edge, depth in _walk(hit.tool_id, dependencies, d_limit, edge_kinds, seen, keep):
            if order == "weighted":
                weight = path_weight.get(edge.tool, 0.0) * edge.confidence
                path_weight[edge.depends_on] = weight
            else:
                # a dependency that is itself a strong search hit keeps its own place
                weight = max(own * dependency_share, relevance.get(edge.depends_on, 0.0))
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
