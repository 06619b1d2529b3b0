"""Embedding similarity between a tool and the utility tools it may need.

The threshold was set on the ToolLinkOS gold graph (in-sample): among (tool, core tool) pairs that no
rule links, gold edges are 4 % at cosine >= 0.70 and 10 % at >= 0.55 (MiniLM, ``tool_document``
text). Similar text mostly means "same topic", not "needs". So the pass only fires on near-duplicates
of a utility (cosine >= ``SIMILARITY_THRESHOLD``), and since no gold graph confirms its edges their
calibrated confidence is ``NO_EVIDENCE``: kept in the graph, never walked by retrieval.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping, Sequence
from typing import Protocol, runtime_checkable

import numpy as np

from toolweave.inference.producers import ToolProfile
from toolweave.inference.universe import group_by, in_order
from toolweave.records import DependencyEdge, EdgeKind

__all__ = ["SIMILARITY_MAX_PER_TOOL", "SIMILARITY_THRESHOLD", "similarity_edges"]

SIMILARITY_THRESHOLD = 0.8
"""Cosine at or above which a tool is linked to a utility tool by text alone (see module docstring)."""
SIMILARITY_MAX_PER_TOOL = 8
"""A tool is linked to at most this many utilities, its most similar ones. A catalog of thousands of
near-identical input-free tools (every one a utility, every pair above the threshold) would otherwise
make tools x tools edges: 10,000 such tools made ~10^8 edges and 13 GB before the ingest could commit.
The edges are never walked (``NO_EVIDENCE``), so the cap costs retrieval nothing. (An incremental
ingest proposes only edges touching its change: a tool outside it may keep an older link beside a new,
more similar one until the tool itself changes.)"""
_MARGIN = 1e-3
"""Slack of the batched pre-filter: a product computed in another order may differ in the last bits."""
_CHUNK = 8192


def similarity_edges(
    universe: Sequence[ToolProfile],
    vectors: Mapping[str, np.ndarray],
    *,
    already: Collection[tuple[str, str]] = (),
    threshold: float = SIMILARITY_THRESHOLD,
    focus: Collection[str] | None = None,
) -> Iterator[DependencyEdge]:
    """``TOOL_INDIRECTLY_DEPENDS_ON`` edges from a tool to very similar utility (core/ambient) tools.

    With ``focus`` (the ids an incremental ingest changed) only edges with an end in it are proposed:
    a tool outside it is scored only when it comes near one of the focus's utilities (one matrix
    product per chunk), so an ingest into a large registry costs its own size and those few tools
    times the utilities, not every tool times every utility. Each tool keeps its
    ``SIMILARITY_MAX_PER_TOOL`` most similar utilities, ranked among all of them in both passes.
    """
    utilities = [p for p in group_by(universe, _utility).get("utility", ()) if p.id in vectors]
    if not utilities:
        return
    util_matrix = np.stack([np.asarray(vectors[p.id], dtype=np.float32) for p in utilities])
    everyone = np.arange(len(utilities))
    in_focus = everyone if focus is None else np.array([j for j, u in enumerate(utilities) if u.id in focus])
    focus_matrix = util_matrix[in_focus] if in_focus.size else None
    near = (
        None
        if focus is None or focus_matrix is None
        else _near_focus(universe, vectors, focus, focus_matrix, threshold)
    )
    taken = set(already)
    for t in universe if focus is None else in_order(universe, {*focus, *(near or ())}):
        if t.id not in vectors or t.kind == "core":
            continue
        if focus is not None and t.id not in focus and (near is None or t.id not in near):
            continue
        # ranked among every utility, also for a tool outside the focus: the cap keeps the same most
        # similar ones as a full pass, of which only those in the focus are proposed here
        sims = util_matrix @ np.asarray(vectors[t.id], dtype=np.float32)
        above = np.flatnonzero(sims >= threshold)
        linked: list[int] = []
        for j in above[np.argsort(-sims[above], kind="stable")]:  # most similar first
            u = utilities[int(j)]
            if u.id == t.id or (t.id, u.id) in taken or (u.id, t.id) in taken:
                continue
            linked.append(int(j))
            if len(linked) == SIMILARITY_MAX_PER_TOOL:
                break
        for j in sorted(linked):  # in universe order, as before the cap
            u = utilities[int(j)]
            if focus is not None and t.id not in focus and u.id not in focus:
                continue
            yield DependencyEdge(
                tool=t.id,
                depends_on=u.id,
                kind=EdgeKind.TOOL_INDIRECTLY_DEPENDS_ON,
                origin="inferred",
                reason=f"{u.id} is a utility whose description is nearly the same task",
                evidence=f"similarity: cosine {float(sims[j]):.3f} >= {threshold}",
            )


def _utility(p: ToolProfile) -> tuple[str, ...]:
    return ("utility",) if p.kind == "core" or p.is_ambient else ()


def _near_focus(
    universe: Sequence[ToolProfile],
    vectors: Mapping[str, np.ndarray],
    focus: Collection[str],
    focus_matrix: np.ndarray,
    threshold: float,
) -> set[str]:
    """Ids outside ``focus`` whose vector comes near ``threshold`` with a focus utility: one matrix
    product per chunk of tools instead of one per tool (at 100k tools the loop was the cost). Only
    these are then scored exactly as before, so the edges and their cosines are the same."""
    others = [t.id for t in universe if t.id in vectors and t.kind != "core" and t.id not in focus]
    near: set[str] = set()
    for start in range(0, len(others), _CHUNK):
        ids = others[start : start + _CHUNK]
        block = _stack(vectors, ids)
        hits = np.flatnonzero((block @ focus_matrix.T >= threshold - _MARGIN).any(axis=1))
        near.update(ids[int(n)] for n in hits)
    return near


@runtime_checkable
class _Stackable(Protocol):
    """Vectors that stack a block of rows at once (the registry's ``VectorRows``: fancy indexing)."""

    def stack(self, ids: Sequence[str]) -> np.ndarray: ...


def _stack(vectors: Mapping[str, np.ndarray], ids: Sequence[str]) -> np.ndarray:
    if isinstance(vectors, _Stackable):
        return np.asarray(vectors.stack(ids), dtype=np.float32)
    return np.stack([np.asarray(vectors[i], dtype=np.float32) for i in ids])
