"""Hybrid fusion: combine vector and full-text rankings into one. Pure functions over ``Hit`` lists."""

from __future__ import annotations

from collections.abc import Sequence

from toolweave.retrieval.results import Hit

__all__ = ["convex_fusion"]


def _min_max(hits: Sequence[Hit]) -> dict[str, float]:
    if not hits:
        return {}
    scores = [h.score for h in hits]
    lo, hi = min(scores), max(scores)
    if hi - lo <= 1e-12:
        return {h.tool_id: 1.0 for h in hits}
    return {h.tool_id: (h.score - lo) / (hi - lo) for h in hits}


def convex_fusion(vector: Sequence[Hit], text: Sequence[Hit], alpha: float) -> list[Hit]:
    """``alpha * vector + (1 - alpha) * text`` after min-max normalising each list (hybrid search).

    Scores of different retrievers live on different scales (cosine vs BM25), so each list is
    normalised on its own; a tool missing from one list gets 0 there.
    """
    v, t = _min_max(vector), _min_max(text)
    fused = {i: alpha * v.get(i, 0.0) + (1 - alpha) * t.get(i, 0.0) for i in v.keys() | t.keys()}
    order = {h.tool_id: n for n, h in enumerate([*vector, *text])}  # stable tie-break: first seen
    return [Hit(i, s) for i, s in sorted(fused.items(), key=lambda kv: (-kv[1], order[kv[0]]))]
