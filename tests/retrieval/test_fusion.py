from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar, cast

import pytest

from toolweave.names import NameVocabulary
from toolweave.records import DependencyEdge, EdgeKind, SearchResults, SearchScope
from toolweave.retrieval.fusion import (
    EQUAL_WEIGHTS,
    calibrate,
    fixed_weight,
    fuse,
    turn_relevance,
    zscore_fusion,
)
from toolweave.retrieval.pipeline import fleet_calibration, retrieve
from toolweave.retrieval.results import Hit
from toolweave.settings import RetrievalSettings

T = TypeVar("T")


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


def test_fleet_calibration_weighs_the_retriever_that_is_sure_on_this_fleet() -> None:
    vector, text = _conflict()
    assert zscore_fusion(vector, text)[0].tool_id == "vlead"
    # a fleet where BM25's leaders stand far out of its lists and the vectors' barely do
    bm25_fleet = calibrate([(_spread("v", 0.02), _spread("t", 2.0))] * 5)
    assert bm25_fleet.text_weight > 1.2
    assert fuse(vector, text, bm25_fleet)[0].tool_id == "tlead"
    # and the other way round
    vector_fleet = calibrate([(_spread("v", 2.0), _spread("t", 0.02))] * 5)
    assert vector_fleet.text_weight < 0.8
    assert fuse(*_conflict()[::-1], vector_fleet)[0].tool_id == "tlead"  # lists swapped: vector = "t..."


def test_fleet_calibration_weight_is_the_ratio_of_mean_peaks_to_the_power() -> None:
    turns = [(_spread("v", lead_v), _spread("t", lead_t)) for lead_v, lead_t in ((0.5, 1.0), (0.7, 1.5))]
    calibration = calibrate(turns, top_n=1, power=2.0)
    mean_v = (_z_of_leader(turns[0][0]) + _z_of_leader(turns[1][0])) / 2
    mean_t = (_z_of_leader(turns[0][1]) + _z_of_leader(turns[1][1])) / 2
    assert calibration.vector_peak == pytest.approx(mean_v) and calibration.text_peak == pytest.approx(mean_t)
    assert calibration.power == 2.0
    assert calibration.text_weight == pytest.approx((mean_t / mean_v) ** 2)


def _z_of_leader(hits: list[Hit]) -> float:
    scores = [h.score for h in hits]
    mean = sum(scores) / len(scores)
    spread = (sum((s - mean) ** 2 for s in scores) / len(scores)) ** 0.5
    return (scores[0] - mean) / spread


def test_fleet_calibration_keeps_equal_weights_without_evidence() -> None:
    vector, text = _conflict()
    assert calibrate([]) == EQUAL_WEIGHTS
    assert fuse(vector, text) == fuse(vector, text, EQUAL_WEIGHTS) == zscore_fusion(vector, text)
    assert calibrate([(vector, [])] * 3).text_weight == 1.0  # BM25 matched nothing: nothing to weigh by


class _FixedIndex:
    """Every query gets the same two candidate lists; probe searches get the fleet's own pair."""

    def __init__(self, vector: list[Hit], text: list[Hit], fleet: tuple[list[Hit], list[Hit]]) -> None:
        self.vector, self.text, self.fleet = vector, text, fleet
        self.calibrations: dict[str, object] = {}

    def search(
        self, queries: Sequence[tuple[str, ...]], k: int, scope: SearchScope | None = None
    ) -> SearchResults:
        return [self.fleet if q[0].startswith("probe") else (self.vector[:k], self.text[:k]) for q in queries]

    def is_destructive(self, tool_id: str) -> bool:
        return False

    def name_vocabulary(self) -> NameVocabulary:
        return NameVocabulary()

    def calibration(self, key: str, compute: Callable[[Sequence[str]], T]) -> T:
        if key not in self.calibrations:
            self.calibrations[key] = compute(["probe one", "probe two"])
        return cast(T, self.calibrations[key])  # the value compute gave for this key


def test_the_pipeline_fuses_with_equal_weights_unless_the_fleet_calibration_is_on() -> None:
    # off by default: the fleet's probes are never searched, and the slightly stronger vector leader wins
    bm25_fleet = _FixedIndex(*_conflict(), fleet=(_spread("v", 0.02), _spread("t", 2.0)))
    assert (
        retrieve("a conflict", bm25_fleet, _no_deps, RetrievalSettings(method="hybrid"))[0].tool_id == "vlead"
    )
    assert bm25_fleet.calibrations == {}


def test_the_pipeline_weighs_bm25_by_the_text_weight() -> None:
    assert fixed_weight(1.0) == EQUAL_WEIGHTS and fixed_weight(0.5).text_weight == 0.5
    index = _FixedIndex(*_conflict(), fleet=(_spread("v", 1.0), _spread("t", 1.0)))
    heavy = RetrievalSettings(method="hybrid", text_weight=1.5)
    assert retrieve("a conflict", index, _no_deps, heavy)[0].tool_id == "tlead"  # BM25's weaker leader
    index.vector, index.text = _conflict()[::-1]  # BM25's leader now the stronger one ("vlead")
    equal, light = (RetrievalSettings(method="hybrid", text_weight=w) for w in (1.0, 0.5))
    assert retrieve("a conflict", index, _no_deps, equal)[0].tool_id == "vlead"
    assert retrieve("a conflict", index, _no_deps, light)[0].tool_id == "tlead"
    assert index.calibrations == {}  # a fixed weight: the fleet's probes are never searched


def test_the_pipeline_fuses_by_the_calibration_of_the_fleet_the_index_holds() -> None:
    params = RetrievalSettings(method="hybrid", fleet_calibration=True)
    bm25_fleet = _FixedIndex(*_conflict(), fleet=(_spread("v", 0.02), _spread("t", 2.0)))
    assert retrieve("a conflict", bm25_fleet, _no_deps, params)[0].tool_id == "tlead"
    assert fleet_calibration(bm25_fleet).text_weight > 1.2
    vector_fleet = _FixedIndex(*_conflict(), fleet=(_spread("v", 2.0), _spread("t", 0.02)))
    assert retrieve("a conflict", vector_fleet, _no_deps, params)[0].tool_id == "vlead"


def test_a_ranking_does_not_depend_on_the_requests_before_it() -> None:
    # The old running record learned from each turn: after 20 turns of a BM25-sure fleet, the same
    # conflict ranked the other way. Now the fleet's probes alone decide, whatever came before.
    params = RetrievalSettings(method="hybrid", fleet_calibration=True)
    index = _FixedIndex(*_conflict(), fleet=(_spread("v", 1.0), _spread("t", 1.0)))
    first = retrieve("a conflict", index, _no_deps, params)
    index.vector, index.text = _spread("v", 0.02), _spread("t", 2.0)
    for _ in range(50):
        retrieve("another turn", index, _no_deps, params)
    index.vector, index.text = _conflict()
    assert retrieve("a conflict", index, _no_deps, params) == first


def _no_deps(tool_id: str, kinds: Sequence[EdgeKind] | None = None) -> list[DependencyEdge]:
    return []
