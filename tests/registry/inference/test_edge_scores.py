"""score_edges: pair matching, per-kind figures, undefined figures are None (not a fake zero)."""

from __future__ import annotations

from toolweave.inference import score_edges
from toolweave.records import DependencyEdge, EdgeKind

TD, PD = EdgeKind.TOOL_DIRECTLY_DEPENDS_ON, EdgeKind.PARAMETER_DIRECTLY_DEPENDS_ON


def e(a: str, b: str, kind: EdgeKind) -> DependencyEdge:
    return DependencyEdge(tool=a, depends_on=b, kind=kind)


def test_scores() -> None:
    gold = [e("a", "b", TD), e("a", "c", PD), e("b", "c", PD)]
    pred = [e("a", "b", PD), e("a", "c", PD), e("c", "a", TD)]
    s = score_edges(pred, gold)
    assert (s.matched, s.gold_edges, s.predicted_edges) == (2, 3, 3)
    assert round(s.precision, 3) == round(2 / 3, 3) and round(s.recall, 3) == round(2 / 3, 3)
    assert s.kind_accuracy == 0.5
    assert s.per_kind[TD.value]["recall"] == 1.0 and s.per_kind[TD.value]["kind_accuracy"] == 0.0
    assert s.per_kind[TD.value]["precision"] == 0.0  # (c, a) is not gold
    assert s.per_kind[PD.value]["precision"] == 1.0
    assert s.per_kind[EdgeKind.TOOL_INDIRECTLY_DEPENDS_ON.value]["precision"] is None
