"""Retrieval metrics exactly as the ToolLinkOS README defines them (they reproduce the paper's Table 3).

AP@K = (1 / min(|gold|, K)) * sum over ranks i ≤ K where item i is gold of (gold hits in top i) / i;
Recall@K = |gold ∩ top K| / |gold|; nDCG@K with binary gains; Complete@K = every gold tool in the top K.
The relevance floor never shortens the list; it marks which tools are published. ``returned`` is the
mean number of tools published per query, ``precision`` the share of them that are gold and
``published_recall`` the share of gold tools among them (without marks: the whole list).
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
    runs: Sequence[tuple[Sequence[str], Sequence[str]]],
    ks: Sequence[int] = (10, 20, 30),
    published: Sequence[Sequence[str]] | None = None,
) -> dict[str, float]:
    """Mean of every metric at every K over ``(ranked, gold)`` pairs: keys like ``map@10``, plus
    ``returned`` (tools published per query), ``precision`` and ``published_recall`` of the published
    tools (``published[i]`` of run ``i``; the whole ranked list when not given)."""
    shown = published if published is not None else [r for r, _ in runs]
    pairs = list(zip(shown, (g for _, g in runs), strict=True))
    out: dict[str, float] = {
        "returned": fmean(len(p) for p, _ in pairs) if pairs else 0.0,
        "precision": fmean(precision(p, g) for p, g in pairs) if pairs else 0.0,
        "published_recall": fmean(recall(p, g, len(p)) for p, g in pairs) if pairs else 0.0,
    }
    for k in ks:
        out[f"map@{k}"] = fmean(average_precision(r, g, k) for r, g in runs) if runs else 0.0
        out[f"recall@{k}"] = fmean(recall(r, g, k) for r, g in runs) if runs else 0.0
        out[f"ndcg@{k}"] = fmean(ndcg(r, g, k) for r, g in runs) if runs else 0.0
        out[f"complete@{k}"] = fmean(complete(r, g, k) for r, g in runs) if runs else 0.0
    return out
