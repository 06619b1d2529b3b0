"""The fleet's request map, the numpy fit alone (``toolweave.registry.fleet_fit``): synthetic vectors."""

from __future__ import annotations

import numpy as np
import pytest

from toolweave.registry.fleet_fit import (
    FitParams,
    _gradient,
    _hard_bias,
    apply_map,
    fit_map,
    mean_average_precision,
    mean_reciprocal_rank,
)
from toolweave.registry.fleet_map import _check, _Pairs


def unit(x: np.ndarray) -> np.ndarray:
    out: np.ndarray = (x / np.linalg.norm(x, axis=-1, keepdims=True)).astype(np.float32)
    return out


def fleet(seed: int = 3, tools: int = 40, dim: int = 24, requests: int = 60):
    """Tools, and requests worded like tool ``(gold + 1) % tools`` that led to ``gold``: this fleet's
    users say one thing and mean another, which only its traffic can teach."""
    rng = np.random.default_rng(seed)
    d = unit(rng.normal(size=(tools, dim)))
    gold = rng.integers(0, tools // 2, size=requests)  # traffic reaches half of the tools
    q = unit(d[(gold + 1) % tools] + 0.3 * unit(rng.normal(size=(requests, dim))))
    return q, [[int(g)] for g in gold], d


def test_the_fit_lifts_the_training_requests_gold_tools() -> None:
    q, golds, d = fleet()
    w = fit_map(q, golds, d)
    before = mean_reciprocal_rank(None, q, golds, d)
    after = mean_reciprocal_rank(w, q, golds, d)
    assert before < 0.3
    assert after > before + 0.3


def test_no_request_is_the_identity_map() -> None:
    _, _, d = fleet()
    w = fit_map(np.zeros((0, d.shape[1]), np.float32), [], d)
    assert w.shape == (d.shape[1], d.shape[1])
    assert not w.any()
    v = unit(np.arange(1.0, d.shape[1] + 1))
    assert np.allclose(apply_map(w, v), v)


def test_the_fit_is_deterministic() -> None:
    q, golds, d = fleet()
    assert np.array_equal(fit_map(q, golds, d), fit_map(q, golds, d))


def test_the_l2_pull_keeps_the_map_near_the_identity() -> None:
    q, golds, d = fleet()
    loose = fit_map(q, golds, d, FitParams(l2=0.0))
    tight = fit_map(q, golds, d, FitParams(l2=10.0))
    assert np.linalg.norm(tight) < 0.5 * np.linalg.norm(loose)


def test_a_large_catalogue_trains_on_the_golds_and_the_nearest_tools() -> None:
    q, golds, d = fleet(tools=200)
    w = fit_map(q, golds, d, FitParams(max_tools=50, nearest=8))
    assert mean_reciprocal_rank(w, q, golds, d) > mean_reciprocal_rank(None, q, golds, d) + 0.2


@pytest.mark.parametrize(
    "params",
    [
        FitParams(scale=5.0, l2=0.1, each_gold=False, hard=1.0),
        FitParams(scale=5.0, l2=0.1, each_gold=True, hard=1.0),
        FitParams(scale=5.0, l2=0.1, each_gold=False, hard=3.0, hard_top=3),
        FitParams(scale=5.0, l2=0.1, each_gold=True, hard=3.0, hard_top=3),
    ],
    ids=["best gold", "each gold", "hard negatives", "each gold, hard negatives"],
)
def test_the_analytic_gradient_matches_finite_differences(params: FitParams) -> None:
    q, golds, d = fleet(tools=12, dim=6, requests=9)
    gold = np.zeros((len(q), len(d)), dtype=bool)
    for i, rows in enumerate(golds):
        gold[i, rows] = True
    gold[0, 5] = True  # a request that led to two tools
    gold[1, [2, 3, 4]] = True  # and one that led to three
    rng = np.random.default_rng(0)
    w = 0.1 * rng.normal(size=(6, 6))
    qd, dd = q.astype(np.float64), d.astype(np.float64)
    bias = _hard_bias(qd, dd, gold, params)
    offset = np.zeros(gold.shape) if bias is None else bias

    def loss(w: np.ndarray) -> float:
        u = qd + qd @ w.T
        logits = params.scale * (u / np.linalg.norm(u, axis=1, keepdims=True)) @ dd.T + offset
        if params.each_gold:  # each gold against the negatives alone
            negatives = np.log(np.where(gold, 0.0, np.exp(logits)).sum(axis=1, keepdims=True))
            per_gold = np.where(gold, np.logaddexp(negatives, logits) - logits, 0.0)
            terms = per_gold.sum(axis=1) / gold.sum(axis=1)
        else:
            every = np.log(np.exp(logits).sum(axis=1))
            terms = every - np.log(np.where(gold, np.exp(logits), 0.0).sum(axis=1))
        return float(np.mean(terms) + params.l2 * np.sum(w * w))

    numeric = np.zeros_like(w)
    for i in range(6):
        for j in range(6):
            step = np.zeros_like(w)
            step[i, j] = 1e-6
            numeric[i, j] = (loss(w + step) - loss(w - step)) / 2e-6
    assert np.allclose(_gradient(w, qd, dd, gold, params, bias), numeric, atol=1e-6)


def test_the_hard_negatives_are_the_nearest_tools_that_are_not_golds() -> None:
    q = unit(np.array([[1.0, 0.0, 0.0]]))
    d = unit(np.array([[0.9, 0.1, 0.0], [1.0, 0.05, 0.0], [0.0, 1.0, 0.0], [0.8, 0.0, 0.6], [0.0, 0.0, 1.0]]))
    gold = np.array([[False, True, False, False, False]])
    assert _hard_bias(q, d, gold, FitParams(hard=1.0)) is None  # weighed like the rest: no bias at all
    bias = _hard_bias(q, d, gold, FitParams(hard=4.0, hard_top=2))
    assert bias is not None
    # tool 1, the nearest, is the gold; the two nearest others are 0 and 3
    assert np.allclose(bias, [[np.log(4.0), 0.0, 0.0, np.log(4.0), 0.0]])
    default = _hard_bias(q, d, gold, FitParams())  # the default fit weighs them more
    assert default is not None and default.max() > 0


def two_gold_fleet(seed: int = 5, tools: int = 30, dim: int = 16, requests: int = 40):
    """Requests that each led to two tools: one they are worded like, one a hop away that the plain
    ranking puts far down (a turn that lists a folder, then reads a file in it)."""
    rng = np.random.default_rng(seed)
    d = unit(rng.normal(size=(tools, dim)))
    first = rng.integers(0, tools // 2, size=requests)
    q = unit(d[first] + 0.2 * unit(rng.normal(size=(requests, dim))))
    return q, [[int(f), int(f) + tools // 2] for f in first], d


def test_each_gold_lifts_every_tool_a_request_led_to_not_only_its_best() -> None:
    q, golds, d = two_gold_fleet()
    best_only = fit_map(q, golds, d, FitParams(l2=0.001, each_gold=False))
    each = fit_map(q, golds, d, FitParams(l2=0.001))  # the default
    # the best gold is first already: the plain loss has little left to learn, both golds must be lifted
    assert mean_reciprocal_rank(None, q, golds, d) > 0.95
    plain = mean_average_precision(best_only, q, golds, d)
    assert mean_average_precision(each, q, golds, d) > plain + 0.1


def test_average_precision_counts_every_gold() -> None:
    q = unit(np.array([[1.0, 0.0]]))
    d = unit(np.array([[1.0, 0.1], [0.9, 0.5], [0.5, 0.9], [0.0, 1.0]]))
    # golds at ranks 1 and 3: (1/1 + 2/3) / 2; the reciprocal rank sees only the first
    assert mean_average_precision(None, q, [[0, 2]], d) == pytest.approx((1 + 2 / 3) / 2)
    assert mean_reciprocal_rank(None, q, [[0, 2]], d) == pytest.approx(1.0)
    assert mean_average_precision(None, q, [[3]], d) == pytest.approx(1 / 4)


def pairs_of(q: np.ndarray, golds: list[list[int]], d: np.ndarray) -> _Pairs:
    texts = [f"request {n}" for n in range(len(q))]
    return _Pairs(q, golds, texts, d, [f"t{n}" for n in range(len(d))], len(q), "x")


def test_the_refit_check_keeps_the_candidate_that_ranks_held_out_requests_best() -> None:
    q, golds, d = fleet(requests=200)
    pairs = pairs_of(q, golds, d)
    idle, learns = FitParams(steps=0), FitParams(l2=0.001)  # no step: the identity map
    for candidates in ([idle, learns], [learns, idle]):
        chosen, before, after = _check(pairs, candidates)
        assert chosen is learns
        assert after > before + 0.2
    chosen, before, after = _check(pairs, [idle])
    assert chosen is idle and after == pytest.approx(before)
