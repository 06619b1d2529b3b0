"""Embedding similarity between a tool and the utility tools it may need.

The threshold was set on the ToolLinkOS gold graph (in-sample): among (tool, core tool) pairs that no
rule links, gold edges are 4 % at cosine >= 0.70 and 10 % at >= 0.55 (MiniLM, ``tool_document``
text). Similar text mostly means "same topic", not "needs". So the pass only fires on near-duplicates
of a utility (cosine >= ``SIMILARITY_THRESHOLD``), and since no gold graph confirms its edges their
calibrated confidence is ``NO_EVIDENCE``: kept in the graph, never walked by retrieval.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping, Sequence

import numpy as np

from toolweave.records import DependencyEdge, EdgeKind
from toolweave.registry.inference.producers import ToolProfile
from toolweave.registry.inference.universe import group_by, in_order
from toolweave.registry.vector_rows import stack_rows

__all__ = ["SIMILARITY_THRESHOLD", "similarity_edges"]

SIMILARITY_THRESHOLD = 0.8
"""Cosine at or above which a tool is linked to a utility tool by text alone (see module docstring)."""
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
    a tool outside it is compared with the focus's utilities alone, so an ingest into a large
    registry costs its own size times the utilities, not every tool times every utility.
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
        if focus is None or t.id in focus:
            columns, sims = everyone, util_matrix @ np.asarray(vectors[t.id], dtype=np.float32)
        elif focus_matrix is not None and near is not None and t.id in near:
            columns, sims = in_focus, focus_matrix @ np.asarray(vectors[t.id], dtype=np.float32)
        else:
            continue
        for j in np.flatnonzero(sims >= threshold):
            u = utilities[int(columns[j])]
            if u.id == t.id or (t.id, u.id) in taken or (u.id, t.id) in taken:
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
        block = stack_rows(vectors, ids)
        hits = np.flatnonzero((block @ focus_matrix.T >= threshold - _MARGIN).any(axis=1))
        near.update(ids[int(n)] for n in hits)
    return near
