from __future__ import annotations

import pytest

from toolweave.retrieval.fusion import convex_fusion
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
