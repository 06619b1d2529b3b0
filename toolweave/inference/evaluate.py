"""Score inferred edges against a gold graph: precision, recall, F1, overall and per edge kind."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from toolweave.records import DependencyEdge, EdgeKind

__all__ = ["EdgeScores", "score_edges"]


@dataclass
class EdgeScores:
    """A predicted edge matches a gold edge on (tool, depends_on); kinds are scored on matched pairs."""

    gold_edges: int
    predicted_edges: int
    matched: int
    precision: float
    recall: float
    f1: float
    per_kind: dict[str, dict[str, Any]] = field(default_factory=dict)
    kind_accuracy: float = 0.0
    """Share of matched pairs whose predicted kind equals the gold kind."""

    def as_dict(self) -> dict[str, Any]:
        return {
            "precision": round(self.precision, 4),
            "recall": round(self.recall, 4),
            "f1": round(self.f1, 4),
            "kind_accuracy": round(self.kind_accuracy, 4),
            "gold_edges": self.gold_edges,
            "predicted_edges": self.predicted_edges,
            "matched": self.matched,
            "per_kind": self.per_kind,
        }


def _prf(tp: int, n_pred: int, n_gold: int) -> tuple[float, float, float]:
    p = tp / n_pred if n_pred else 0.0
    r = tp / n_gold if n_gold else 0.0
    f = 2 * p * r / (p + r) if p + r else 0.0
    return p, r, f


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 4)


def score_edges(predicted: Sequence[DependencyEdge], gold: Sequence[DependencyEdge]) -> EdgeScores:
    """Pairs are deduplicated first (a gold pair listed under two kinds counts once).

    Per kind K: precision = matched predicted pairs of kind K / predicted pairs of kind K; recall =
    matched gold pairs of kind K / gold pairs of kind K (pair match, any predicted kind);
    ``kind_accuracy`` = of the gold pairs of kind K that were matched, how many were predicted as K.
    """
    gold_kind: dict[tuple[str, str], EdgeKind] = {}
    for e in gold:
        gold_kind.setdefault((e.tool, e.depends_on), e.kind)
    pred_kind: dict[tuple[str, str], EdgeKind] = {}
    for e in sorted(predicted, key=lambda x: -x.confidence):
        pred_kind.setdefault((e.tool, e.depends_on), e.kind)
    matched = set(gold_kind) & set(pred_kind)
    p, r, f = _prf(len(matched), len(pred_kind), len(gold_kind))
    per_kind: dict[str, dict[str, Any]] = {}
    for kind in EdgeKind:
        g = {pair for pair, k in gold_kind.items() if k == kind}
        pr = {pair for pair, k in pred_kind.items() if k == kind}
        # None where a figure is undefined (no gold or no predicted edge of this kind), not a fake 0
        kp = len(pr & set(gold_kind)) / len(pr) if pr else None
        kr = len(g & set(pred_kind)) / len(g) if g else None
        kf = 2 * kp * kr / (kp + kr) if kp is not None and kr is not None and kp + kr else None
        hit = g & set(pred_kind)
        acc = sum(1 for pair in hit if pred_kind[pair] == kind) / len(hit) if hit else None
        per_kind[kind.value] = {
            "gold": len(g),
            "predicted": len(pr),
            "precision": _round(kp),
            "recall": _round(kr),
            "f1": _round(kf),
            "kind_accuracy": _round(acc),
        }
    same = sum(1 for pair in matched if pred_kind[pair] == gold_kind[pair])
    return EdgeScores(
        gold_edges=len(gold_kind),
        predicted_edges=len(pred_kind),
        matched=len(matched),
        precision=p,
        recall=r,
        f1=f,
        per_kind=per_kind,
        kind_accuracy=same / len(matched) if matched else 0.0,
    )
