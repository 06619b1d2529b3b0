"""Hybrid fusion: combine vector and full-text rankings into one. Pure functions over ``Hit`` lists.

Cosine similarities and BM25 scores live on different scales, and which retriever is right differs by
fleet (Seal-Tools' camelCase names favour BM25, MetaTool's paraphrased requests favour vectors) and
by query. ``zscore_fusion`` (the default) puts each list on its own per-query scale: a retriever
whose best candidates stand far above the rest of its list is confident, and its leaders weigh more,
with no constant chosen per fleet. ``rrf_fusion`` and ``convex_fusion`` are kept for comparison.
"""

from __future__ import annotations

from collections.abc import Sequence
from statistics import fmean, pstdev

from toolweave.retrieval.results import Hit

__all__ = ["RRF_K", "convex_fusion", "fuse", "rrf_fusion", "turn_relevance", "zscore_fusion"]

RRF_K = 60
"""The constant of reciprocal rank fusion (Cormack et al. 2009)."""


def _min_max(hits: Sequence[Hit]) -> dict[str, float]:
    if not hits:
        return {}
    scores = [h.score for h in hits]
    lo, hi = min(scores), max(scores)
    if hi - lo <= 1e-12:
        return {h.tool_id: 1.0 for h in hits}
    return {h.tool_id: (h.score - lo) / (hi - lo) for h in hits}


def _ranked(fused: dict[str, float], vector: Sequence[Hit], text: Sequence[Hit]) -> list[Hit]:
    order = {h.tool_id: n for n, h in enumerate([*vector, *text])}  # stable tie-break: first seen
    return [Hit(i, s) for i, s in sorted(fused.items(), key=lambda kv: (-kv[1], order[kv[0]]))]


def convex_fusion(vector: Sequence[Hit], text: Sequence[Hit], alpha: float) -> list[Hit]:
    """``alpha * vector + (1 - alpha) * text`` after min-max normalising each list (hybrid search).

    A tool missing from one list gets 0 there.
    """
    v, t = _min_max(vector), _min_max(text)
    fused = {i: alpha * v.get(i, 0.0) + (1 - alpha) * t.get(i, 0.0) for i in v.keys() | t.keys()}
    return _ranked(fused, vector, text)


def rrf_fusion(vector: Sequence[Hit], text: Sequence[Hit], k: int = RRF_K) -> list[Hit]:
    """Reciprocal rank fusion: ``sum 1 / (k + rank)`` over the lists a tool appears in."""
    fused: dict[str, float] = {}
    for hits in (vector, text):
        for rank, hit in enumerate(hits, 1):
            fused[hit.tool_id] = fused.get(hit.tool_id, 0.0) + 1.0 / (k + rank)
    return _ranked(fused, vector, text)


def _z_scores(hits: Sequence[Hit]) -> tuple[dict[str, float], float]:
    """Each score as standard deviations above its list's mean, and the floor for absent tools."""
    if not hits:
        return {}, 0.0
    scores = [h.score for h in hits]
    mean, spread = fmean(scores), pstdev(scores)
    if spread <= 1e-12:  # one candidate, or all tied: no evidence to prefer any
        return {h.tool_id: 0.0 for h in hits}, 0.0
    z = {h.tool_id: (h.score - mean) / spread for h in hits}
    # a tool this retriever did not list scores below everything it did list
    return z, (min(scores) - mean) / spread


def zscore_fusion(vector: Sequence[Hit], text: Sequence[Hit]) -> list[Hit]:
    """Sum of per-query z-scores (distribution-based score fusion), equal weights.

    A list with one clear winner (a name the query repeats, for BM25) gives that winner a high z; a
    flat list (a retriever with no idea) gives everything about 0 and leaves the choice to the other.
    """
    v, v_absent = _z_scores(vector)
    t, t_absent = _z_scores(text)
    fused = {i: v.get(i, v_absent) + t.get(i, t_absent) for i in v.keys() | t.keys()}
    return _ranked(fused, vector, text)


def fuse(vector: Sequence[Hit], text: Sequence[Hit], method: str, alpha: float) -> list[Hit]:
    """The fusion ``method`` (``zscore``, ``rrf`` or ``convex`` with ``alpha``) of both lists."""
    if method == "convex":
        return convex_fusion(vector, text, alpha)
    if method == "rrf":
        return rrf_fusion(vector, text)
    return zscore_fusion(vector, text)


def turn_relevance(hits: Sequence[Hit]) -> dict[str, float]:
    """Scores mapped onto [0, 1] within one turn (best 1, worst listed 0).

    Fused scores have no fixed scale; only their spread within the turn says how far a candidate is
    from the best one. The walk order and the relevance floor both read this.
    """
    if not hits:
        return {}
    scores = [h.score for h in hits]
    best, worst = max(scores), min(scores)
    spread = best - worst
    return {h.tool_id: (h.score - worst) / spread if spread > 1e-12 else 1.0 for h in hits}
