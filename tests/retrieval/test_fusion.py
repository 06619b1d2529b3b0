from __future__ import annotations

import gc
import weakref
from collections.abc import Sequence

import pytest

from toolweave.records import SearchResults, SearchScope
from toolweave.retrieval.fusion import (
    RRF_K,
    FleetCalibration,
    convex_fusion,
    fleet_calibration,
    fuse,
    peak_fusion,
    rrf_fusion,
    turn_relevance,
    weighted_zscore_fusion,
    zscore_fusion,
)
from toolweave.retrieval.pipeline import retrieve
from toolweave.retrieval.results import Hit
from toolweave.settings import RetrievalSettings


def test_convex_fusion_normalises_each_list() -> None:
    vector = [Hit("a", 0.9), Hit("b", 0.7), Hit("c", 0.1)]
    text = [Hit("c", 30.0), Hit("b", 20.0), Hit("d", 10.0)]
    fused = convex_fusion(vector, text, alpha=0.6)
    scores = {h.tool_id: h.score for h in fused}
    assert scores["a"] == pytest.approx(0.6)  # vector 1.0 * 0.6, absent from text
    assert scores["b"] == pytest.approx(0.6 * 0.75 + 0.4 * 0.5)
    assert scores["c"] == pytest.approx(0.4)
    assert scores["d"] == pytest.approx(0.0)
    assert [h.tool_id for h in fused] == ["b", "a", "c", "d"]
    assert [h.tool_id for h in convex_fusion(vector, text, alpha=1.0)][:3] == ["a", "b", "c"]
    tied = convex_fusion([Hit("x", 1.0)], [Hit("y", 1.0)], alpha=0.5)
    assert [h.tool_id for h in tied] == ["x", "y"]  # ties keep first-seen order
    assert convex_fusion(vector, text, alpha=0.0)[0].tool_id == "c"


def test_rrf_rewards_agreement_between_lists() -> None:
    vector = [Hit("a", 0.9), Hit("b", 0.8)]
    text = [Hit("b", 12.0), Hit("c", 3.0)]
    fused = rrf_fusion(vector, text)
    assert [h.tool_id for h in fused] == ["b", "a", "c"]
    assert fused[0].score == pytest.approx(1 / (RRF_K + 2) + 1 / (RRF_K + 1))


def test_zscore_fusion_lets_the_confident_list_lead() -> None:
    # 30 candidates each. BM25 has one clear winner (a name the query repeats) that the vector side
    # ranks 15th in an evenly spread list: the outlier must lead the fused list.
    vector = [Hit(f"v{n}", 0.60 - n * 0.01) for n in range(30)]
    vector[15] = Hit("win", vector[15].score)
    text = [Hit("win", 40.0), *(Hit(f"t{n}", 10.0 - n * 0.2) for n in range(29))]
    assert zscore_fusion(vector, text)[0].tool_id == "win"
    # convex fusion at the old default (alpha 0.8) trusts the vector side and buries it
    assert convex_fusion(vector, text, alpha=0.8)[0].tool_id == "v0"
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


def test_fuse_dispatches_on_the_setting() -> None:
    vector = [Hit("a", 0.9), Hit("b", 0.1)]
    text = [Hit("b", 9.0), Hit("a", 1.0)]
    assert fuse(vector, text, "convex", 1.0)[0].tool_id == "a"
    assert fuse(vector, text, "convex", 0.0)[0].tool_id == "b"
    assert fuse(vector, text, "rrf", 0.8) == rrf_fusion(vector, text)
    assert fuse(vector, text, "zscore", 0.8) == zscore_fusion(vector, text)
    assert fuse(vector, text, "peak", 0.8) == peak_fusion(vector, text)


def _multi_part_request() -> tuple[list[Hit], list[Hit]]:
    """A three-part request: BM25 matches each part's words and three leaders stand out of its list;
    the one embedding of the whole request found a fairly good single tool and little else."""
    text = [Hit("part1", 9.0), Hit("part2", 8.5), Hit("part3", 8.0)]
    text += [Hit(f"t{n}", 2.0 - n * 0.05) for n in range(27)]
    vector = [Hit("blurred", 0.54), Hit("v0", 0.50), Hit("v1", 0.49)]
    vector += [Hit(f"v{n}", 0.48 - n * 0.002) for n in range(2, 25)]
    vector += [Hit("part1", 0.40), Hit("part2", 0.399), Hit("part3", 0.398)]
    return vector, text


def test_peak_fusion_trusts_the_list_whose_leaders_stand_out() -> None:
    vector, text = _multi_part_request()
    # equal weights: the vector side's lone leader comes first
    assert zscore_fusion(vector, text)[0].tool_id == "blurred"
    # weighted by peak (mean z of each list's top 3), BM25's three leaders come first
    assert [h.tool_id for h in peak_fusion(vector, text)][:3] == ["part1", "part2", "part3"]
    # the first hit alone (top_n 1) sees one outlier in each list and trusts the vector side's more
    assert peak_fusion(vector, text, top_n=1)[0].tool_id == "blurred"


def test_peak_fusion_reduces_to_zscore_fusion_without_peaks_or_power() -> None:
    vector, text = _multi_part_request()
    assert peak_fusion(vector, text, power=0.0) == zscore_fusion(vector, text)
    flat_vector = [Hit("a", 0.5), Hit("b", 0.5)]
    flat_text = [Hit("b", 3.0), Hit("c", 3.0)]
    assert peak_fusion(flat_vector, flat_text) == zscore_fusion(flat_vector, flat_text)  # no peak: equal
    assert [h.tool_id for h in peak_fusion([Hit("only", 0.4)], [])] == ["only"]
    assert peak_fusion([], []) == []


def test_weighted_zscore_fusion_weighs_the_bm25_side() -> None:
    vector = [Hit("a", 0.9), Hit("b", 0.5), Hit("c", 0.1)]
    text = [Hit("c", 9.0), Hit("b", 5.0), Hit("a", 1.0)]
    assert weighted_zscore_fusion(vector, text, text_weight=1.0) == zscore_fusion(vector, text)
    assert weighted_zscore_fusion(vector, text, text_weight=2.0)[0].tool_id == "c"
    assert weighted_zscore_fusion(vector, text, text_weight=0.5)[0].tool_id == "a"


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
    params = RetrievalSettings(method="hybrid", fusion="fleet")
    bm25_fleet = _FixedIndex(_spread("v", 0.02), _spread("t", 2.0))
    for _ in range(FleetCalibration().warm_up):
        retrieve("a turn", bm25_fleet, lambda _tool, _kinds=None: [], params)
    # the same index now meets a conflict: the fleet's record says BM25, plain z-scores say vector
    bm25_fleet.vector, bm25_fleet.text = _conflict()
    assert retrieve("a conflict", bm25_fleet, lambda _tool, _kinds=None: [], params)[0].tool_id == "tlead"
    zscore = RetrievalSettings(method="hybrid", fusion="zscore")
    assert retrieve("a conflict", bm25_fleet, lambda _tool, _kinds=None: [], zscore)[0].tool_id == "vlead"
    # a fresh index has no record yet
    fresh = _FixedIndex(*_conflict())
    assert retrieve("a conflict", fresh, lambda _tool, _kinds=None: [], params)[0].tool_id == "vlead"
