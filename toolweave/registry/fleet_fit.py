"""The fleet's request map, the pure part: ``q → normalise(q + W q)``, fitted with numpy.

A registry learns from its own traffic which tool a request led to (usage examples of origin ``call``,
``toolweave.registry.usage``). ``fit_map`` turns those pairs into a linear map of the request vector, the
cheap request-side layer of ``bench/query_adapter.py`` without torch: the tool vectors stay as they are
(no reindex), only the request moves. ``W`` starts at 0 (the identity map) and an L2 pull keeps it near 0,
so tools the traffic never reached keep their place unless a trained request now outranks them.

The loss is a softmax over the catalogue (every tool a negative; a large catalogue keeps the golds and
each request's nearest tools), scale ``FitParams.scale``, with every tool a request was recorded for as a
positive (a turn that called two tools is one request with two golds, not two requests that contradict):
each gold against the negatives alone (``each_gold``: a turn that called two tools needs both near the
top, as the first pass is measured), the tools the unmapped ranking confuses with the golds weighed more
(``hard``). Tools the traffic never reached are only ever negatives: what that costs their requests, and
an attempt that did not help (each tool's own vector added as a request that must find it), is in
bench/RESULTS.md, "The fleet teaches its own model".
The gradient is analytic through the normalisation; full-batch Adam, so a fit is deterministic.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass

import numpy as np

__all__ = [
    "GATE_TOP",
    "FitParams",
    "FleetMap",
    "apply_map",
    "fit_map",
    "gated_scores",
    "mean_average_precision",
    "mean_reciprocal_rank",
]

GATE_TOP = 1
"""A request is mapped only when its nearest tools before the map, this many, all had traffic
(``FleetMap.covers``). Chosen on MetaTool with 30 % of its tools given no traffic, of 1 and 3: the nearest
tool alone kept the most of the map's gain (0.757 vs 0.750; no gate 0.741) and cost those tools' requests
0.015 beside usage vectors alone (no gate 0.089, top 3 nothing). Confirmed on BFCL multi-turn and ToolLinkOS:
never below usage vectors alone (bench/RESULTS.md, "The fleet teaches its own model")."""


@dataclass(frozen=True, slots=True)
class FitParams:
    scale: float = 20.0
    """Softmax scale over cosines (the lab's)."""
    l2: float = 0.01
    """Pull of ``W`` towards 0 (the identity map), on the sum of its squares."""
    steps: int = 200
    lr: float = 1e-3
    max_tools: int = 4096
    """Negatives beyond this many tools: the golds and each request's nearest tools only."""
    nearest: int = 32
    each_gold: bool = True
    """Every tool a request led to must outrank the negatives (one softmax per gold, the other golds left
    out), not only its best one: a turn that called two tools needs both first. False: one softmax where
    the golds' sum is the positive (the first map's loss: lifting the best gold was enough)."""
    hard: float = 3.0
    """Weight of a request's hard negatives in its softmax (the tools other than its golds among its
    ``hard_top`` nearest before the map: the ones the unmapped ranking confuses with the gold); 1 weighs
    them like every other tool. ``each_gold`` and 3 / 5 were chosen on half of BFCL multi-turn's
    learning half, measured on its other half (of 3 / 5, 3 / 10, 5 / 5: equal within 0.002), and
    confirmed on the measured half, MetaTool and ToolLinkOS (bench/RESULTS.md)."""
    hard_top: int = 5


TUNING: tuple[FitParams, ...] = (FitParams(),)
"""The fit settings a refit tries by default, each checked on requests held out of the fleet's own
traffic (``FleetMapBook.refit``): the fleet tunes its map on nothing but what it saw."""


def gated_scores(
    matrix: np.ndarray, ids: Sequence[str], vector: np.ndarray, w: np.ndarray, reached: Collection[str] | None
) -> np.ndarray:
    """Every tool's score for the request ``vector`` (rows of ``matrix``, tool ids ``ids``), through the
    map ``w`` when the request's ``GATE_TOP`` nearest tools without it all had traffic (``reached``;
    None: every tool): ``FleetMap.covers``. The registry's search and a starting gateway's ready table
    (``server/turns/ready_rank.py``) both rank so."""
    scores: np.ndarray = matrix @ vector
    gate = min(GATE_TOP, len(ids))
    if gate == 0:
        return scores
    nearest = np.argpartition(-scores, gate - 1)[:gate]
    if reached is None or all(ids[int(i)] in reached for i in nearest):
        mapped: np.ndarray = matrix @ apply_map(w, vector)
        return mapped
    return scores


def apply_map(w: np.ndarray, vectors: np.ndarray) -> np.ndarray:
    """``normalise(q + W q)`` for one vector or a row per request (a ranking ignores the norm, but the
    fused scores that follow compare cosines)."""
    mapped = vectors + vectors @ w.T
    norm = np.linalg.norm(mapped, axis=-1, keepdims=True)
    out: np.ndarray = (mapped / np.where(norm > 0, norm, 1.0)).astype(np.float32)
    return out


def fit_map(
    queries: np.ndarray,
    positives: Sequence[Sequence[int]],
    tools: np.ndarray,
    params: FitParams | None = None,
) -> np.ndarray:
    """``W`` (dim × dim) that ranks each request's ``positives`` (rows of ``tools``) first.

    ``queries``: one unit vector per distinct request; ``tools``: the catalogue's unit vectors. No
    request: the identity map (W = 0)."""
    params = params or FitParams()
    dim = tools.shape[1] if tools.ndim == 2 else queries.shape[-1]
    w = np.zeros((dim, dim), dtype=np.float64)
    if len(queries) == 0 or len(tools) == 0:
        return w.astype(np.float32)
    q = np.asarray(queries, dtype=np.float64)
    columns = _candidates(q, positives, tools, params)
    d = np.asarray(tools[columns], dtype=np.float64)
    where = {int(c): n for n, c in enumerate(columns)}
    gold = np.zeros((len(q), len(columns)), dtype=bool)
    for i, rows in enumerate(positives):
        gold[i, [where[int(r)] for r in rows]] = True
    bias = _hard_bias(q, d, gold, params)
    m = np.zeros_like(w)
    v = np.zeros_like(w)
    beta1, beta2, eps = 0.9, 0.999, 1e-8
    for step in range(1, params.steps + 1):
        grad = _gradient(w, q, d, gold, params, bias)
        m = beta1 * m + (1 - beta1) * grad
        v = beta2 * v + (1 - beta2) * grad * grad
        w -= params.lr * (m / (1 - beta1**step)) / (np.sqrt(v / (1 - beta2**step)) + eps)
    return w.astype(np.float32)


def _hard_bias(q: np.ndarray, d: np.ndarray, gold: np.ndarray, params: FitParams) -> np.ndarray | None:
    """``log(hard)`` on each request's hard negatives (see ``FitParams.hard``), 0 elsewhere; None when
    they weigh like the rest. Fixed by the unmapped ranking, so the fit does not chase its own moves."""
    if params.hard == 1.0 or params.hard_top <= 0:
        return None
    scores = np.where(gold, -np.inf, q @ d.T)
    top = min(params.hard_top, d.shape[0] - 1)
    bias = np.zeros_like(scores)
    if top <= 0:
        return bias
    near = np.argpartition(-scores, top - 1, axis=1)[:, :top]
    np.put_along_axis(bias, near, float(np.log(params.hard)), axis=1)
    out: np.ndarray = np.where(gold, 0.0, bias)
    return out


def _gradient(
    w: np.ndarray,
    q: np.ndarray,
    d: np.ndarray,
    gold: np.ndarray,
    params: FitParams,
    bias: np.ndarray | None = None,
) -> np.ndarray:
    """d/dW of the loss + l2·|W|², through ``u = q + W q``, ``v = u/|u|``. The loss, with ``s`` the
    scaled cosines plus ``bias`` on the negatives: mean(logsumexp(all) − logsumexp(golds)), or with
    ``each_gold`` the mean over each request's golds g of logsumexp({g} ∪ negatives) − s_g."""
    u = q + q @ w.T
    norm = np.linalg.norm(u, axis=1, keepdims=True)
    norm = np.where(norm > 0, norm, 1.0)
    unit = u / norm
    logits = params.scale * (unit @ d.T)
    if bias is not None:
        logits = logits + bias
    logits -= logits.max(axis=1, keepdims=True)
    weights = np.exp(logits)
    if params.each_gold:
        negatives = np.where(gold, 0.0, weights).sum(axis=1, keepdims=True)
        share = np.where(gold, weights / (weights + negatives), 0.0)  # each gold's own softmax
        per_gold = np.where(gold, 1.0 / (weights + negatives), 0.0).sum(axis=1, keepdims=True)
        count = gold.sum(axis=1, keepdims=True)
        g_logits = (np.where(gold, share - 1.0, weights * per_gold)) / count
    else:
        every = weights / weights.sum(axis=1, keepdims=True)
        golds = np.where(gold, weights, 0.0)
        g_logits = every - golds / golds.sum(axis=1, keepdims=True)
    g_unit = params.scale * (g_logits @ d) / len(q)
    g_u = (g_unit - unit * np.sum(g_unit * unit, axis=1, keepdims=True)) / norm
    out: np.ndarray = g_u.T @ q + 2.0 * params.l2 * w
    return out


def _candidates(
    q: np.ndarray, positives: Sequence[Sequence[int]], tools: np.ndarray, params: FitParams
) -> np.ndarray:
    """The tool rows the softmax runs over: all of them up to ``max_tools``; else the golds and each
    request's ``nearest`` tools (the ones the map could wrongly lift or must push down)."""
    if len(tools) <= params.max_tools:
        return np.arange(len(tools))
    chosen = {int(r) for rows in positives for r in rows}
    scores = q @ np.asarray(tools, dtype=np.float64).T
    near = np.argpartition(-scores, min(params.nearest, len(tools) - 1), axis=1)[:, : params.nearest]
    chosen.update(int(c) for c in near.ravel())
    return np.array(sorted(chosen), dtype=np.int64)


def mean_reciprocal_rank(
    w: np.ndarray | None, queries: np.ndarray, positives: Sequence[Sequence[int]], tools: np.ndarray
) -> float:
    """Mean over requests of 1 / the best gold's rank among ``tools``."""
    return _mean_over_requests(w, queries, positives, tools, every_gold=False)


def mean_average_precision(
    w: np.ndarray | None, queries: np.ndarray, positives: Sequence[Sequence[int]], tools: np.ndarray
) -> float:
    """Mean over requests of the average precision of their golds among ``tools`` (the fit's own figure:
    the reciprocal rank where a request led to one tool; where it led to two, both count, as in the
    first-pass mAP a fleet is measured by)."""
    return _mean_over_requests(w, queries, positives, tools, every_gold=True)


def _mean_over_requests(
    w: np.ndarray | None,
    queries: np.ndarray,
    positives: Sequence[Sequence[int]],
    tools: np.ndarray,
    *,
    every_gold: bool,
) -> float:
    if len(queries) == 0:
        return 0.0
    mapped = queries if w is None else apply_map(w, queries)
    scores = mapped @ np.asarray(tools).T
    total = 0.0
    for i, rows in enumerate(positives):
        ranks = sorted(1 + int(np.sum(scores[i] > scores[i, r])) for r in set(rows))
        if every_gold:  # a tie with another gold does not push it down
            total += sum((n + 1) / max(rank, n + 1) for n, rank in enumerate(ranks)) / len(ranks)
        else:
            total += 1.0 / ranks[0]
    return total / len(queries)


@dataclass(frozen=True, slots=True)
class FleetMap:
    """A fitted map as the registry holds it (``toolweave.registry.fleet_map``)."""

    w: np.ndarray
    model: str
    """The embedding model whose request vectors it maps: another model's requests are left alone."""
    examples: int
    requests: int
    tools: int
    fitted_ns: int
    fingerprint: str
    """What it was fitted from (the recorded calls): a refit of the same traffic is skipped."""
    before: float
    after: float
    """Mean average precision of the requests held out of the check fit, without and with its map."""
    reached: frozenset[str] | None = None
    """The tools the fit saw traffic for (None, a map stored before this was kept: every tool)."""

    def apply(self, vector: np.ndarray) -> np.ndarray:
        return apply_map(self.w, vector)

    def covers(self, tool_ids: Iterable[str]) -> bool:
        """Whether the map may move a request whose unmapped first tools are ``tool_ids``.

        The fit only ever saw tools without traffic as negatives, so it moves a request worded for one
        of them towards the siblings the traffic reached (measured: MetaTool with 30 % of its tools
        silent, their requests lost 0.09 mAP@10 to the map). A request is mapped only when its
        ``GATE_TOP`` nearest tools before the map all had traffic: the map then sharpens a choice among
        tools it knows, and does not take a request away from a tool it could not learn."""
        return self.reached is None or all(t in self.reached for t in tool_ids)
