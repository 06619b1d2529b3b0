"""Hybrid fusion: combine vector and full-text rankings into one. Functions over ``Hit`` lists, and
one small running record per fleet.

Cosine similarities and BM25 scores live on different scales, and which retriever is right differs by
fleet (Seal-Tools' camelCase names favour BM25, MetaTool's paraphrased requests favour vectors) and
by query. ``zscore_fusion`` puts each list on its own per-query scale: a retriever whose best
candidates stand far above the rest of its list is confident, and its leaders weigh more. The default,
``FleetCalibration`` (``fusion: fleet``), also weighs BM25 against the vectors by how confident each
has been over the turns this fleet has served: a fleet-level choice read from the fleet's own traffic,
with no gold answers and no constant set per fleet. ``peak_fusion`` weighs each list by its peak for
this query alone; ``rrf_fusion`` and ``convex_fusion`` are kept for comparison.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Sequence

from toolweave.retrieval.results import Hit

__all__ = [
    "FLEET_POWER",
    "FLEET_TOP_N",
    "RRF_K",
    "FleetCalibration",
    "fleet_calibration",
    "fuse",
    "mean_and_spread",
    "turn_relevance",
    "zscore_fusion",
]

RRF_K = 60
"""The constant of reciprocal rank fusion (Cormack et al. 2009)."""

FLEET_TOP_N = 1
"""A turn's confidence of a retriever: the mean z-score of its first this many hits (its peak)."""

FLEET_POWER = 3.0
"""BM25's weight is (its mean peak / the vectors' mean peak) ** this (chosen leave-one-dataset-out)."""


def _ranked(fused: dict[str, float], vector: Sequence[Hit], text: Sequence[Hit]) -> list[Hit]:
    order = {h.tool_id: n for n, h in enumerate([*vector, *text])}  # stable tie-break: first seen
    return [Hit(i, s) for i, s in sorted(fused.items(), key=lambda kv: (-kv[1], order[kv[0]]))]


def mean_and_spread(scores: Sequence[float]) -> tuple[float, float]:
    """Mean and population standard deviation of ``scores`` (at least one). Every fused search computes
    a few: ``statistics`` computes them exactly, with fractions, at ~45 µs for 30 scores; ``fsum`` is
    within a rounding of it at ~3 µs. Raises ``OverflowError`` for scores near float's limit."""
    mean = math.fsum(scores) / len(scores)
    return mean, math.sqrt(math.fsum((x - mean) ** 2 for x in scores) / len(scores))


def _z_scores(hits: Sequence[Hit]) -> tuple[dict[str, float], float]:
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


_ZScores = tuple[dict[str, float], float]


def _weighted(
    vector: Sequence[Hit], text: Sequence[Hit], v_z: _ZScores, t_z: _ZScores, w_vector: float, w_text: float
) -> list[Hit]:
    (v, v_absent), (t, t_absent) = v_z, t_z
    fused = {i: w_vector * v.get(i, v_absent) + w_text * t.get(i, t_absent) for i in v.keys() | t.keys()}
    return _ranked(fused, vector, text)


def zscore_fusion(vector: Sequence[Hit], text: Sequence[Hit]) -> list[Hit]:
    """Sum of per-query z-scores (distribution-based score fusion), equal weights.

    A list with one clear winner (a name the query repeats, for BM25) gives that winner a high z; a
    flat list (a retriever with no idea) gives everything about 0 and leaves the choice to the other.
    """
    return _weighted(vector, text, _z_scores(vector), _z_scores(text), 1.0, 1.0)


def _peak(hits: Sequence[Hit], z: dict[str, float], top_n: int) -> float:
    """Mean z of the list's first ``top_n`` hits (ranks it lacks count 0), never below 0."""
    if not hits or top_n < 1:
        return 0.0
    return max(sum(z[h.tool_id] for h in hits[:top_n]) / top_n, 0.0)


class FleetCalibration:
    """How confident each retriever has been on this fleet: the running mean of its peak per turn.

    Which retriever is right is mostly a property of the fleet (BM25 on Seal-Tools' thousands of
    near-identical tool descriptions told apart by one word, vectors on MetaTool's paraphrased requests),
    and a retriever's peak (how far its first hit stands above the rest of its list, in z-scores) says
    how sure it is. One turn's peak is noisy; averaged over the fleet's turns it is a stable verdict
    that needs no gold answers. BM25's z-scores are then weighted ``(text mean / vector mean) **
    power`` against the vectors' 1. Until ``warm_up`` turns have been seen the weights stay equal
    (plain z-score fusion); past ``horizon`` turns the mean becomes a moving one, so a fleet that
    changes is followed. One per index (``fleet_calibration``). Not locked: two turns observed at the
    same instant may count as one, which moves a running mean by nothing that matters.
    """

    def __init__(
        self, top_n: int = FLEET_TOP_N, power: float = FLEET_POWER, warm_up: int = 20, horizon: int = 1000
    ) -> None:
        self.top_n, self.power, self.warm_up, self.horizon = top_n, power, warm_up, horizon
        self.turns = 0
        self._vector = self._text = 0.0  # running mean peaks

    def observe(
        self, vector: Sequence[Hit], text: Sequence[Hit], z: tuple[_ZScores, _ZScores] | None = None
    ) -> None:
        """Count one turn's two candidate lists (``z``: their z-scores, when already computed)."""
        v_z, t_z = z or (_z_scores(vector), _z_scores(text))
        v_peak = _peak(vector, v_z[0], self.top_n)
        t_peak = _peak(text, t_z[0], self.top_n)
        self.turns += 1
        rate = 1.0 / min(self.turns, self.horizon)
        self._vector += (v_peak - self._vector) * rate
        self._text += (t_peak - self._text) * rate

    def text_weight(self) -> float:
        """BM25's weight against the vectors' 1 (1 while warming up or without evidence)."""
        vector, text = self._vector, self._text
        if self.turns < self.warm_up or vector <= 1e-12 or text <= 1e-12:
            return 1.0
        return float((text / vector) ** self.power)

    def fuse(self, vector: Sequence[Hit], text: Sequence[Hit]) -> list[Hit]:
        """Observe this turn, then z-score fusion with BM25 weighted by the fleet's record so far."""
        v_z, t_z = _z_scores(vector), _z_scores(text)  # once, for the record and for the fusion
        self.observe(vector, text, (v_z, t_z))
        return _weighted(vector, text, v_z, t_z, 1.0, self.text_weight())


_CALIBRATIONS: weakref.WeakKeyDictionary[object, FleetCalibration] = weakref.WeakKeyDictionary()


def fleet_calibration(index: object) -> FleetCalibration:
    """The calibration of the fleet ``index`` serves: made on first use, dropped with the index.

    Kept here, keyed weakly by the index object, so that no caller has to carry it (the gateway's
    registry lives as long as the gateway, so its record does too). An index that cannot be weakly
    referenced gets a fresh record each turn, i.e. plain z-score fusion (never another index's record).
    """
    try:
        return _CALIBRATIONS.setdefault(index, FleetCalibration())  # a race makes one spare, unused
    except TypeError:
        return FleetCalibration()


def fuse(
    vector: Sequence[Hit], text: Sequence[Hit], calibration: FleetCalibration | None = None
) -> list[Hit]:
    """Both lists fused by ``calibration`` (the fleet's record, which it updates); without one, plain
    z-score fusion (equal weights, what a record does while it warms up)."""
    if calibration is not None:
        return calibration.fuse(vector, text)
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
