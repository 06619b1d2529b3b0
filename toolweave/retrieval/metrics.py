"""Retrieval metrics exactly as the ToolLinkOS README defines them (they reproduce the paper's Table 3).

AP@K = (1 / min(|gold|, K)) * sum over ranks i ≤ K where item i is gold of (gold hits in top i) / i;
Recall@K = |gold ∩ top K| / |gold|; nDCG@K with binary gains; Complete@K = every gold tool in the top K.
With a relevance floor the list may be shorter than K: ``returned`` is the mean list length and
``precision`` the share of returned tools that are gold.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from statistics import fmean

__all__ = ["average_precision", "complete", "ndcg", "precision", "recall", "summarize"]


def average_precision(ranked: Sequence[str], gold: Iterable[str], k: int) -> float:
    gold_set = set(gold)
    if not gold_set:
        return 0.0
    hits = 0
    total = 0.0
    for i, tool in enumerate(ranked[:k], 1):
        if tool in gold_set:
            hits += 1
            total += hits / i
    return total / min(len(gold_set), k)


def recall(ranked: Sequence[str], gold: Iterable[str], k: int) -> float:
    gold_set = set(gold)
    return len(gold_set & set(ranked[:k])) / len(gold_set) if gold_set else 0.0


def ndcg(ranked: Sequence[str], gold: Iterable[str], k: int) -> float:
    gold_set = set(gold)
    dcg = sum(1.0 / math.log2(i + 1) for i, tool in enumerate(ranked[:k], 1) if tool in gold_set)
    ideal = sum(1.0 / math.log2(i + 1) for i in range(1, min(len(gold_set), k) + 1))
    return dcg / ideal if ideal else 0.0


def precision(ranked: Sequence[str], gold: Iterable[str]) -> float:
    """Share of the returned tools that are gold (an empty list is vacuously precise: 1)."""
    return len(set(gold) & set(ranked)) / len(ranked) if ranked else 1.0


def complete(ranked: Sequence[str], gold: Iterable[str], k: int) -> float:
    return 1.0 if set(gold) <= set(ranked[:k]) else 0.0


def summarize(
    runs: Sequence[tuple[Sequence[str], Sequence[str]]], ks: Sequence[int] = (10, 20, 30)
) -> dict[str, float]:
    """Mean of every metric at every K over ``(ranked, gold)`` pairs: keys like ``map@10``, plus
    ``returned`` (tools per query) and ``precision`` of the whole returned list."""
    out: dict[str, float] = {
        "returned": fmean(len(r) for r, _ in runs) if runs else 0.0,
        "precision": fmean(precision(r, g) for r, g in runs) if runs else 0.0,
    }
    for k in ks:
        out[f"map@{k}"] = fmean(average_precision(r, g, k) for r, g in runs) if runs else 0.0
        out[f"recall@{k}"] = fmean(recall(r, g, k) for r, g in runs) if runs else 0.0
        out[f"ndcg@{k}"] = fmean(ndcg(r, g, k) for r, g in runs) if runs else 0.0
        out[f"complete@{k}"] = fmean(complete(r, g, k) for r, g in runs) if runs else 0.0
    return out
