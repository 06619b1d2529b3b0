from __future__ import annotations

import gc
import weakref
from collections.abc import Sequence

import pytest

from toolweave.records import SearchResults, SearchScope
from toolweave.retrieval.fusion import (
    FleetCalibration,
    fleet_calibration,
    fuse,
    turn_relevance,
    zscore_fusion,
)
from toolweave.retrieval.pipeline import retrieve
from toolweave.retrieval.results import Hit
from toolweave.settings import RetrievalSettings


def test_zscore_fusion_lets_the_confident_list_lead() -> None:
    # 30 candidates each. BM25 has one clear winner (a name the query repeats) that the vector side
    # ranks 15th in an evenly spread list: the outlier must lead the fused list.
    vector = [Hit(f"v{n}", 0.60 - n * 0.01) for n in range(30)]
    vector[15] = Hit("win", vector[15].score)
    text = [Hit("win", 40.0), *(Hit(f"t{n}", 10.0 - n * 0.2) for n in range(29))]
    assert zscore_fusion(vector, text)[0].tool_id == "win"
    # and the other way round: a clear vector winner leads over an evenly spread BM25 list
    text = [Hit(f"t{n}", 10.0 - n * 0.2) for n in range(30)]
    vector = [Hit("best", 0.9), *(Hit(f"v{n}", 0.40 - n * 0.005) for n in range(29))]
    assert zscore_fusion(vector, text)[0].tool_id == "best"


def test_zscore_fusion_scores_absent_tools_as_the_weakest_listed() -> None:
    vector = [Hit("a", 0.9), Hit("b", 0.5)]
    fused = {h.tool_id: h.score for h in zscore_fusion(vector, [Hit("c", 2.0), Hit("b", 1.0)])}
    assert fused["a"] == pytest.approx(0.0) and fused["c"] == pytest.approx(0.0)  # +1 and -1 (absent)
    assert fused["b"] == pytest.approx(-2.0)
    assert [h.tool_id for h in zscore_fusion([Hit("only", 0.4)], [])] == ["only"]  # no spread: kept


def test_turn_relevance_spans_best_to_worst() -> None:
    rel = turn_relevance([Hit("a", 3.0), Hit("b", 2.0), Hit("c", -1.0)])
    assert rel == pytest.approx({"a": 1.0, "b": 0.75, "c": 0.0})
    assert turn_relevance([Hit("a", 3.0)]) == {"a": 1.0}


def _spread(prefix: str, lead: float) -> list[Hit]:
    """30 hits: a leader ``lead`` above an evenly spread rest (the higher ``lead``, the higher its peak)."""
    return [Hit(f"{prefix}lead", 1.0 + lead), *(Hit(f"{prefix}{n}", 1.0 - n * 0.01) for n in range(29))]


def _conflict() -> tuple[list[Hit], list[Hit]]:
    """Each retriever has its own leader, the vector side's slightly stronger: equal weights pick it."""
    return _spread("v", 0.30), _spread("t", 0.28)


def test_fleet_calibration_weighs_the_retriever_that_has_been_sure_on_this_fleet() -> None:
    vector, text = _conflict()
    assert zscore_fusion(vector, text)[0].tool_id == "vlead"
    # a fleet where BM25's leaders stand far out of its lists and the vectors' barely do
    bm25_fleet = FleetCalibration(warm_up=5)
    for _ in range(5):
        bm25_fleet.observe(_spread("v", 0.02), _spread("t", 2.0))
    assert bm25_fleet.text_weight() > 1.2
    assert bm25_fleet.fuse(vector, text)[0].tool_id == "tlead"
    # and the other way round
    vector_fleet = FleetCalibration(warm_up=5)
    for _ in range(5):
        vector_fleet.observe(_spread("v", 2.0), _spread("t", 0.02))
    assert vector_fleet.text_weight() < 0.8
    assert vector_fleet.fuse(*_conflict()[::-1])[0].tool_id == "tlead"  # lists swapped: vector = "t..."


def test_fleet_calibration_weight_is_the_ratio_of_mean_peaks_to_the_power() -> None:
    calibration = FleetCalibration(top_n=1, power=2.0, warm_up=2)
    peaks = []
    for lead_v, lead_t in ((0.5, 1.0), (0.7, 1.5)):
        vector, text = _spread("v", lead_v), _spread("t", lead_t)
        z_v, z_t = _z_of_leader(vector), _z_of_leader(text)
        peaks.append((z_v, z_t))
        calibration.observe(vector, text)
    mean_v, mean_t = (peaks[0][0] + peaks[1][0]) / 2, (peaks[0][1] + peaks[1][1]) / 2
    assert calibration.turns == 2
    assert calibration.text_weight() == pytest.approx((mean_t / mean_v) ** 2)


def _z_of_leader(hits: list[Hit]) -> float:
    scores = [h.score for h in hits]
    mean = sum(scores) / len(scores)
    spread = (sum((s - mean) ** 2 for s in scores) / len(scores)) ** 0.5
    return (scores[0] - mean) / spread


def test_fleet_calibration_keeps_equal_weights_while_warming_up_or_without_evidence() -> None:
    vector, text = _conflict()
    calibration = FleetCalibration(warm_up=5)
    for _ in range(2):  # turns 1-4 (a fuse counts as a turn too): equal weights
        calibration.observe(_spread("v", 0.02), _spread("t", 2.0))
        assert calibration.fuse(vector, text) == zscore_fusion(vector, text)
    assert calibration.text_weight() == 1.0
    calibration.observe(_spread("v", 0.02), _spread("t", 2.0))
    assert calibration.turns == 5 and calibration.text_weight() > 1.0  # turn 5: the record counts
    no_bm25 = FleetCalibration(warm_up=1)
    no_bm25.observe(vector, [])  # BM25 matched nothing: no evidence to weigh it by
    assert no_bm25.text_weight() == 1.0


def test_fleet_calibration_follows_a_fleet_that_changes() -> None:
    calibration = FleetCalibration(warm_up=1, horizon=10)
    for _ in range(50):
        calibration.observe(_spread("v", 0.02), _spread("t", 2.0))
    assert calibration.text_weight() > 1.0
    for _ in range(50):  # the fleet now favours the vectors: the old turns fade within the horizon
        calibration.observe(_spread("v", 2.0), _spread("t", 0.02))
    assert calibration.text_weight() < 1.0


def test_fleet_calibration_is_one_per_index_and_goes_with_it() -> None:
    class Index:
        pass

    first, second = Index(), Index()
    assert fleet_calibration(first) is fleet_calibration(first)
    assert fleet_calibration(first) is not fleet_calibration(second)
    record = weakref.ref(fleet_calibration(first))
    del first
    gc.collect()
    assert record() is None  # the module let go of it with its index
    assert fleet_calibration(second) is fleet_calibration(second)


class _FixedIndex:
    """Every query gets the same two candidate lists (unit test of the pipeline's wiring)."""

    def __init__(self, vector: list[Hit], text: list[Hit]) -> None:
        self.vector, self.text = vector, text

    def search(
        self, queries: Sequence[tuple[str, ...]], k: int, scope: SearchScope | None = None
    ) -> SearchResults:
        return [(self.vector[:k], self.text[:k]) for _ in queries]

    def find(self, tool_id: str) -> object | None:
        return None


def test_pipeline_fleet_fusion_learns_from_the_turns_on_the_same_index() -> None:
    params = RetrievalSettings(method="hybrid")
    bm25_fleet = _FixedIndex(_spread("v", 0.02), _spread("t", 2.0))
    for _ in range(FleetCalibration().warm_up):
        retrieve("a turn", bm25_fleet, lambda _tool, _kinds=None: [], params)
    # the same index now meets a conflict: the fleet's record says BM25, plain z-scores say vector
    bm25_fleet.vector, bm25_fleet.text = _conflict()
    assert retrieve("a conflict", bm25_fleet, lambda _tool, _kinds=None: [], params)[0].tool_id == "tlead"
    assert zscore_fusion(*_conflict())[0].tool_id == "vlead"  # what plain z-scores say
    # a fresh index has no record yet
    fresh = _FixedIndex(*_conflict())
    assert retrieve("a conflict", fresh, lambda _tool, _kinds=None: [], params)[0].tool_id == "vlead"


def test_fuse_follows_the_fleet_record_it_is_given_and_plain_zscores_without_one() -> None:
    record = FleetCalibration()
    for _ in range(record.warm_up):
        record.observe(_spread("v", 0.02), _spread("t", 2.0))  # a fleet where BM25 stands out
    vector, text = _conflict()
    assert fuse(vector, text) == zscore_fusion(vector, text)
    assert fuse(vector, text)[0].tool_id == "vlead"
    assert fuse(vector, text, record)[0].tool_id == "tlead"
    assert record.turns == record.warm_up + 1  # the turn counts in the record it was fused by
