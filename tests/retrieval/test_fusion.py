from __future__ import annotations

import pytest

from toolweave.retrieval.fusion import RRF_K, convex_fusion, fuse, rrf_fusion, turn_relevance, zscore_fusion
from toolweave.retrieval.results import Hit


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


def test_turn_relevance_spans_best_to_worst() -> None:
    rel = turn_relevance([Hit("a", 3.0), Hit("b", 2.0), Hit("c", -1.0)])
    assert rel == pytest.approx({"a": 1.0, "b": 0.75, "c": 0.0})
    assert turn_relevance([Hit("a", 3.0)]) == {"a": 1.0}
