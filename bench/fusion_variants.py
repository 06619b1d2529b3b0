"""Hybrid fusions measured against the product's (``toolweave.retrieval.fusion``) and not shipped.

Kept for the lab (``bench/ranking_lab.py lodo``), not offered as settings: reciprocal rank fusion,
convex fusion (min-max then ``alpha * vector + (1 - alpha) * bm25``, the paper's hybrid, alpha 0.8),
z-scores with a fixed BM25 weight (a per-fleet constant in disguise) and per-turn peaks (each list
weighted by how far its own leaders stand out, for this query alone: noisier than the fleet's running
record, bench/HISTORY.md "Robust fusion"). They reuse the product's z-scores, so a figure measured here
differs from the shipped fusion by the weighting alone.
"""

from __future__ import annotations

from collections.abc import Sequence

from toolweave.records import Hit
from toolweave.retrieval.fusion import peak, ranked_by_score, weighted_fusion, z_scores

__all__ = [
    "PEAK_POWER",
    "PEAK_TOP_N",
    "RRF_K",
    "convex_fusion",
    "peak_fusion",
    "rrf_fusion",
    "weighted_zscore_fusion",
]

RRF_K = 60
"""The constant of reciprocal rank fusion (Cormack et al. 2009)."""

PEAK_TOP_N = 3
"""``peak_fusion`` reads a list's confidence from the mean z-score of its first this many hits."""

PEAK_POWER = 1.0
"""``peak_fusion`` weighs a list by its peak to this power (0 = equal weights, i.e. z-score fusion)."""


def _min_max(hits: Sequence[Hit]) -> dict[str, float]:
    if not hits:
        return {}
    scores = [h.score for h in hits]
    lo, hi = min(scores), max(scores)
    if hi - lo <= 1e-12:
        return {h.tool_id: 1.0 for h in hits}
    return {h.tool_id: (h.score - lo) / (hi - lo) for h in hits}


def convex_fusion(vector: Sequence[Hit], text: Sequence[Hit], alpha: float = 0.8) -> list[Hit]:
    """``alpha * vector + (1 - alpha) * text`` after min-max normalising each list (hybrid search).

    A tool missing from one list gets 0 there.
    """
    v, t = _min_max(vector), _min_max(text)
    fused = {i: alpha * v.get(i, 0.0) + (1 - alpha) * t.get(i, 0.0) for i in v.keys() | t.keys()}
    return ranked_by_score(fused, vector, text)


def rrf_fusion(vector: Sequence[Hit], text: Sequence[Hit], k: int = RRF_K) -> list[Hit]:
    """Reciprocal rank fusion: ``sum 1 / (k + rank)`` over the lists a tool appears in."""
    fused: dict[str, float] = {}
    for hits in (vector, text):
        for rank, hit in enumerate(hits, 1):
            fused[hit.tool_id] = fused.get(hit.tool_id, 0.0) + 1.0 / (k + rank)
    return ranked_by_score(fused, vector, text)


def weighted_zscore_fusion(vector: Sequence[Hit], text: Sequence[Hit], text_weight: float) -> list[Hit]:
    """Z-score fusion with BM25's z-scores weighted ``text_weight`` against the vector side's 1."""
    return weighted_fusion(vector, text, z_scores(vector), z_scores(text), 1.0, text_weight)


def peak_fusion(
    vector: Sequence[Hit], text: Sequence[Hit], top_n: int = PEAK_TOP_N, power: float = PEAK_POWER
) -> list[Hit]:
    """Z-score fusion with each list weighted by its peak (mean z of its ``top_n`` leaders) ** ``power``;
    equal weights when neither list has a peak."""
    v_z, t_z = z_scores(vector), z_scores(text)
    w_vector, w_text = peak(vector, v_z[0], top_n) ** power, peak(text, t_z[0], top_n) ** power
    if w_vector + w_text <= 1e-12:
        w_vector = w_text = 1.0
    return weighted_fusion(vector, text, v_z, t_z, w_vector, w_text)
