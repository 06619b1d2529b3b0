"""Query-decomposition fusions measured against the product's (``toolweave.retrieval.decompose``) and
not shipped.

Kept for the lab (``bench/ranking_lab.py decompose``), not offered as settings: reciprocal-rank fusion
and round robin from the whole query's list (both lost everywhere in the first grid), ``max`` fusion
with the parts' lists unweighted (``flat``) or down-weighted by a constant, and parts weighted by the
``gap`` of their own list or by a power of the confidence ratio (bench/HISTORY.md, "Query decomposition
that does no harm"). ``LabDecomposition`` subclasses the product's ``Decomposition``, so
``retrieve(..., decomposition=...)`` runs it; its defaults are the product's behaviour.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from statistics import median
from typing import Literal

from fusion_variants import RRF_K

from toolweave.retrieval.decompose import Decomposition, Pass, fuse_max, part_weights
from toolweave.retrieval.results import Hit

__all__ = ["LabDecomposition", "PartWeighting", "VariantFusion", "fuse_variants", "list_confidence"]

VariantFusion = Literal["rrf", "interleave", "max"]

PartWeighting = Literal["flat", "cosine", "gap"]
"""How ``max`` fusion weighs a part's list against the whole query's: ``flat`` = all alike; ``cosine``
= by its best cosine similarity (the product's); ``gap`` = by how far its leader stands above the
median of its own fused list (how sure it is)."""


def list_confidence(hits: Sequence[Hit], cosine: Mapping[str, float], how: PartWeighting) -> float | None:
    """How strongly one variant's first pass found something (None = no evidence: ``flat``, no vector
    side for ``cosine``, fewer than two distinct scores for ``gap``). ``gap``: ``(best - median) /
    (best - worst)`` of the fused scores, in [0, 1]."""
    if how == "cosine":
        return max(cosine.values(), default=None)
    if how == "gap":
        scores = [h.score for h in hits]
        if len(scores) < 2 or max(scores) - min(scores) <= 1e-12:
            return None
        best = max(scores)
        return (best - median(scores)) / (best - min(scores))
    return None


def fuse_variants(
    lists: Sequence[Sequence[Hit]],
    method: VariantFusion,
    k: int,
    part_weight: float = 1.0,
    weights: Sequence[float] | None = None,
) -> list[Hit]:
    """``rrf``: ``sum 1 / (RRF_K + rank)`` over the lists (the whole query's list counts as one of
    them). ``interleave``: round robin, the whole query's list first, each tool once. ``max``: the
    product's ``fuse_max``, the parts' lists also weighted ``part_weight``."""
    if len(lists) == 1:
        return list(lists[0][:k])
    if method == "max":
        base = [1.0] * len(lists) if weights is None else list(weights)
        return fuse_max(lists, k, [w * (1.0 if n == 0 else part_weight) for n, w in enumerate(base)])
    order: dict[str, int] = {}  # tie-break: first seen, in list order
    for hits in lists:
        for h in hits:
            order.setdefault(h.tool_id, len(order))
    fused: dict[str, float] = {}
    if method == "rrf":
        for hits in lists:
            for rank, h in enumerate(hits, 1):
                fused[h.tool_id] = fused.get(h.tool_id, 0.0) + 1.0 / (RRF_K + rank)
    else:
        longest = max(len(hits) for hits in lists)
        for rank in range(longest):
            for hits in lists:
                if rank < len(hits) and hits[rank].tool_id not in fused:
                    # scores fall with the position: the relevance floor and the walk read an order
                    fused[hits[rank].tool_id] = 1.0 / (RRF_K + len(fused) + 1)
    ranked = sorted(fused.items(), key=lambda kv: (-kv[1], order[kv[0]]))
    return [Hit(i, s) for i, s in ranked[:k]]


@dataclass(frozen=True)
class LabDecomposition(Decomposition):
    """A decomposition the lab measures; the defaults fuse as the product does."""

    fusion: VariantFusion = "max"
    part_weight: float = 1.0
    """``max`` fusion: the parts' relevance against the whole query's 1."""
    weighting: PartWeighting = "cosine"
    weighting_power: float = 1.0
    """The power of the confidence ratio."""

    def fuse(self, passes: Sequence[Pass], k: int) -> list[Hit]:
        weights = None
        if self.fusion == "max" and self.weighting != "flat":
            ratios = part_weights([list_confidence(h, c, self.weighting) for h, c in passes])
            weights = [w**self.weighting_power for w in ratios]
        return fuse_variants([hits for hits, _ in passes], self.fusion, k, self.part_weight, weights)
