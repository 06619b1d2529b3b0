"""Relevance floor: search hits too weak for this turn are not returned (nor published).

``final_k`` used to be filled whatever the match: "what time is it in Tokyo" published eight git tools
beside the two time tools. A hit is kept when its relevance within the turn (``turn_relevance``:
best hit 1, weakest candidate 0) reaches ``floor_relative`` and its cosine similarity to the query
reaches ``floor_absolute``. A tool marked destructive needs ``floor_destructive`` more relevance: it
should be published unasked only on a clear match. The best hit always stays (a turn never ends with
nothing to offer), and dependencies of kept tools still come along (the walk runs after the floor).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from toolweave.retrieval.fusion import turn_relevance
from toolweave.retrieval.results import Hit

__all__ = ["apply_floor"]


def apply_floor(
    hits: Sequence[Hit],
    cosine: dict[str, float],
    *,
    relative: float,
    absolute: float = 0.0,
    destructive_extra: float = 0.0,
    is_destructive: Callable[[str], bool] | None = None,
) -> list[Hit]:
    """``hits`` (best first) without those below the floor; the first hit is always kept.

    ``cosine`` is each candidate's cosine similarity to the query (from the vector list); a tool the
    vector side did not list is judged by the weakest listed similarity, which is above its own.
    """
    if not hits or (relative <= 0 and absolute <= 0):
        return list(hits)
    relevance = turn_relevance(hits)
    weakest = min(cosine.values()) if cosine else 1.0
    kept = [hits[0]]
    for hit in hits[1:]:
        need = relative
        if destructive_extra > 0 and is_destructive is not None and is_destructive(hit.tool_id):
            need = min(1.0, relative + destructive_extra)
        if relevance[hit.tool_id] >= need and cosine.get(hit.tool_id, weakest) >= absolute:
            kept.append(hit)
    return kept
