"""Algorithm 1 of Graph RAG-Tool Fusion: walk each first-pass tool's dependencies, depth first.

The result is ``tool 1, its dependencies (pre-order DFS), tool 2, its dependencies, ...`` with every
tool once, cut to ``final_k``. Cycles are harmless (a tool is never visited twice) and ``d_limit``
bounds the depth (1 = direct dependencies only, 0 = no limit). Orderings measured against it and not
shipped (by weight, a share of the hit's relevance, a gate, held hits) live in
``bench/walk_orderings.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

from toolweave.records import DependencyEdge, EdgeKind
from toolweave.retrieval.results import Hit, RankedTool

__all__ = ["DependencyLookup", "expand_with_dependencies"]

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
) -> list[RankedTool]:
    """Rank ``hits[:top_k]`` each followed by its dependency walk; fill up with later hits.

    ``keep`` filters tools that must not be returned (e.g. of an unreachable upstream): they are
    neither listed nor walked through.
    """
    out: list[RankedTool] = []
    seen: set[str] = set()

    def emit_hit(hit: Hit) -> None:
        if hit.tool_id not in seen:
            seen.add(hit.tool_id)
            out.append(RankedTool(hit.tool_id, len(out) + 1, "first_pass", hit.score))

    for hit in hits[:top_k]:
        if len(out) >= final_k:
            break
        emit_hit(hit)
        for edge, depth in _walk(hit.tool_id, dependencies, d_limit, edge_kinds, seen, keep):
            seen.add(edge.depends_on)
            out.append(
                RankedTool(
                    edge.depends_on,
                    len(out) + 1,
                    "dependency",
                    edge.confidence,
                    via=edge.tool,
                    edge_kind=edge.kind,
                    parameter_name=edge.parameter_name,
                    depth=depth,
                )
            )
    for hit in hits[top_k:]:
        if len(out) >= final_k:
            break
        emit_hit(hit)
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
