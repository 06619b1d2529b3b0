"""Relevance floor: which of a turn's tools are strong enough to be published unasked.

``final_k`` is always filled, whatever the match: "what time is it in Tokyo" used to publish eight git
tools beside the two time tools. The ranked list stays whole (``find_tools`` shows it, and every tool
in it stays callable through ``call_tool``: cutting it would cost recall), but only part of it is
*published*. A hit is kept when its relevance within the turn (``turn_relevance``: best hit 1, weakest
candidate 0) reaches ``floor_relative`` and its cosine similarity to the query reaches
``floor_absolute``. A tool marked destructive needs ``floor_destructive`` more relevance: it should be
published unasked only on a clear match. The best hit is always kept (a turn never ends with nothing
to offer), and dependencies walked from kept hits are kept with them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

from toolweave.retrieval.fusion import turn_relevance
from toolweave.retrieval.results import Hit, RankedTool

__all__ = ["MIN_CANDIDATES", "apply_floor", "mark_published"]

MIN_CANDIDATES = 5
"""Fewer candidates than this: no floor. Relevance is measured between the turn's best and weakest
candidate, and in a tiny fleet the weakest may be relevant too (two time tools: the second would
score 0 and never be published). A fleet that small costs nothing to publish whole."""


def apply_floor(
    hits: Sequence[Hit],
    cosine: dict[str, float],
    *,
    relative: float,
    absolute: float = 0.0,
    destructive_extra: float = 0.0,
    is_destructive: Callable[[str], bool] | None = None,
    relevance: Mapping[str, float] | None = None,
) -> list[Hit]:
    """``hits`` (best first) without those below the floor; the first hit is always kept.

    ``cosine`` is each candidate's cosine similarity to the query (from the vector list); a tool the
    vector side did not list is judged by the weakest listed similarity, which is above its own.
    ``relevance``: ``turn_relevance(hits)`` when the caller already has it.
    """
    if len(hits) < MIN_CANDIDATES or (relative <= 0 and absolute <= 0):
        return list(hits)
    relevance = relevance or turn_relevance(hits)
    weakest = min(cosine.values()) if cosine else 1.0
    kept = [hits[0]]
    for hit in hits[1:]:
        need = relative
        if destructive_extra > 0 and is_destructive is not None and is_destructive(hit.tool_id):
            need = min(1.0, relative + destructive_extra)
        if relevance[hit.tool_id] >= need and cosine.get(hit.tool_id, weakest) >= absolute:
            kept.append(hit)
    return kept


def mark_published(ranked: Sequence[RankedTool], kept: Sequence[Hit]) -> list[RankedTool]:
    """``ranked`` with ``publish`` set: kept hits, and dependencies whose walk started at a kept hit."""
    kept_ids = {h.tool_id for h in kept}
    root: dict[str, str] = {}  # tool id -> the search hit its walk started from
    out: list[RankedTool] = []
    for tool in ranked:
        # the walk emits a parent before its dependencies, so ``via`` is already rooted here
        origin = tool.tool_id if tool.reason == "first_pass" else root.get(tool.via or "", tool.via or "")
        root[tool.tool_id] = origin
        publish = origin in kept_ids
        out.append(tool if tool.publish == publish else replace(tool, publish=publish))
    return out
