"""Hybrid fusion: combine vector and full-text rankings into one. Pure functions over ``Hit`` lists.

Cosine similarities and BM25 scores live on different scales, and which retriever is right differs by
fleet (Seal-Tools' camelCase names favour BM25, MetaTool's paraphrased requests favour vectors) and
by query. ``zscore_fusion`` puts each list on its own per-query scale: a retriever whose best
candidates stand far above the rest of its list is confident, and its leaders weigh more. ``fuse``
also weighs BM25 against the vectors by a ``FleetCalibration``: how confident each retriever is on
this fleet, read from probe searches of the fleet's own tools (``calibrate``) once per registry
snapshot, with no gold answers and no constant set per fleet. The calibration is a value passed in,
never a record kept here: a ranking is a function of (snapshot, request, context), whatever was asked
before, on whichever thread or replica.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from toolweave.retrieval.results import Hit

__all__ = [
    "EQUAL_WEIGHTS",
    "FLEET_POWER",
    "FLEET_TOP_N",
    "FleetCalibration",
    "ZScores",
    "calibrate",
    "fixed_weight",
    "fuse",
    "mean_and_spread",
    "peak",
    "ranked_by_score",
    "turn_relevance",
    "weighted_fusion",
    "z_scores",
    "zscore_fusion",
]

FLEET_TOP_N = 1
"""A turn's confidence of a retriever: the mean z-score of its first this many hits (its peak)."""

FLEET_POWER = 3.0
"""BM25's weight is (its mean peak / the vectors' mean peak) ** this (chosen leave-one-dataset-out)."""


def ranked_by_score(fused: dict[str, float], vector: Sequence[Hit], text: Sequence[Hit]) -> list[Hit]:
    order = {h.tool_id: n for n, h in enumerate([*vector, *text])}  # stable tie-break: first seen
    return [Hit(i, s) for i, s in sorted(fused.items(), key=lambda kv: (-kv[1], order[kv[0]]))]


def mean_and_spread(scores: Sequence[float]) -> tuple[float, float]:
    """Mean and population standard deviation of ``scores`` (at least one). Every fused search computes
    a few: ``statistics`` computes them exactly, with fractions, at ~45 µs for 30 scores; ``fsum`` is
    within a rounding of it at ~3 µs. Raises ``OverflowError`` for scores near float's limit."""
    mean = math.fsum(scores) / len(scores)
    return mean, math.sqrt(math.fsum((x - mean) ** 2 for x in scores) / len(scores))


def z_scores(hits: Sequence[Hit]) -> tuple[dict[str, float], float]:
    """Each score as standard deviations above its list's mean, and the floor for absent tools."""
    if not hits:
        return {}, 0.0
    scores = [h.score for h in hits]
    mean, spread = mean_and_spread(scores)
    if spread <= 1e-12:  # one candidate, or all tied: no evidence to prefer any
        return {h.tool_id: 0.0 for h in hits}, 0.0
    z = {h.tool_id: (h.score - mean) / spread for h in hits}
    # a tool this retriever did not list scores below everything it did list
    return z, (min(scores) - mean) / spread


ZScores = tuple[dict[str, float], float]


def weighted_fusion(
    vector: Sequence[Hit], text: Sequence[Hit], v_z: ZScores, t_z: ZScores, w_vector: float, w_text: float
) -> list[Hit]:
    (v, v_absent), (t, t_absent) = v_z, t_z
    fused = {i: w_vector * v.get(i, v_absent) + w_text * t.get(i, t_absent) for i in v.keys() | t.keys()}
    return ranked_by_score(fused, vector, text)


def zscore_fusion(vector: Sequence[Hit], text: Sequence[Hit]) -> list[Hit]:
    """Sum of per-query z-scores (distribution-based score fusion), equal weights.

    A list with one clear winner (a name the query repeats, for BM25) gives that winner a high z; a
    flat list (a retriever with no idea) gives everything about 0 and leaves the choice to the other.
    """
    return weighted_fusion(vector, text, z_scores(vector), z_scores(text), 1.0, 1.0)


def peak(hits: Sequence[Hit], z: dict[str, float], top_n: int) -> float:
    """Mean z of the list's first ``top_n`` hits (ranks it lacks count 0), never below 0."""
    if not hits or top_n < 1:
        return 0.0
    return max(sum(z[h.tool_id] for h in hits[:top_n]) / top_n, 0.0)


@dataclass(frozen=True)
class FleetCalibration:
    """How confident each retriever is on this fleet: the mean peak of each over probe turns.

    Which retriever is right is mostly a property of the fleet (BM25 on Seal-Tools' thousands of
    near-identical tool descriptions told apart by one word, vectors on MetaTool's paraphrased requests),
    and a retriever's peak (how far its first hit stands above the rest of its list, in z-scores) says
    how sure it is. One turn's peak is noisy; averaged over many it is a stable verdict that needs no
    gold answers. BM25's z-scores are weighted ``(text_peak / vector_peak) ** power`` against the
    vectors' 1; without evidence on either side (no probes, BM25 matched nothing) the weights are equal.
    """

    vector_peak: float = 0.0
    text_peak: float = 0.0
    power: float = FLEET_POWER

    @property
    def text_weight(self) -> float:
        """BM25's weight against the vectors' 1."""
        if self.vector_peak <= 1e-12 or self.text_peak <= 1e-12:
            return 1.0
        return float((self.text_peak / self.vector_peak) ** self.power)


EQUAL_WEIGHTS = FleetCalibration()
"""No evidence about the fleet: plain z-score fusion."""


def fixed_weight(text_weight: float) -> FleetCalibration:
    """The calibration that weighs BM25's z-scores ``text_weight`` against the vectors' 1 on every fleet
    (``retrieval.text_weight``)."""
    if text_weight == 1.0:
        return EQUAL_WEIGHTS
    return FleetCalibration(vector_peak=1.0, text_peak=text_weight, power=1.0)


def calibrate(
    turns: Iterable[tuple[Sequence[Hit], Sequence[Hit]]], top_n: int = FLEET_TOP_N, power: float = FLEET_POWER
) -> FleetCalibration:
    """The calibration that probe ``turns`` (each a ``(vector hits, text hits)`` pair) give: each
    retriever's mean peak over them (``EQUAL_WEIGHTS`` for no turns)."""
    vector_peaks: list[float] = []
    text_peaks: list[float] = []
    for vector, text in turns:
        vector_peaks.append(peak(vector, z_scores(vector)[0], top_n))
        text_peaks.append(peak(text, z_scores(text)[0], top_n))
    if not vector_peaks:
        return FleetCalibration(power=power)
    return FleetCalibration(
        math.fsum(vector_peaks) / len(vector_peaks), math.fsum(text_peaks) / len(text_peaks), power
    )


def fuse(
    vector: Sequence[Hit], text: Sequence[Hit], calibration: FleetCalibration = EQUAL_WEIGHTS
) -> list[Hit]:
    """Z-score fusion with BM25 weighted by ``calibration`` (equal weights by default)."""
    return weighted_fusion(vector, text, z_scores(vector), z_scores(text), 1.0, calibration.text_weight)


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
