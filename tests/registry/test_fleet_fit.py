"""The fleet's request map, the numpy fit alone (``toolweave.registry.fleet_fit``): synthetic vectors."""

from __future__ import annotations

import numpy as np

from toolweave.registry.fleet_fit import (
    FitParams,
    _gradient,
    apply_map,
    fit_map,
    mean_reciprocal_rank,
)


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


def test_the_analytic_gradient_matches_finite_differences() -> None:
    q, golds, d = fleet(tools=12, dim=6, requests=9)
    gold = np.zeros((len(q), len(d)), dtype=bool)
    for i, rows in enumerate(golds):
        gold[i, rows] = True
    gold[0, 5] = True  # a request that led to two tools
    params = FitParams(scale=5.0, l2=0.1)
    rng = np.random.default_rng(0)
    w = 0.1 * rng.normal(size=(6, 6))
    qd, dd = q.astype(np.float64), d.astype(np.float64)

    def loss(w: np.ndarray) -> float:
        u = qd + qd @ w.T
        logits = params.scale * (u / np.linalg.norm(u, axis=1, keepdims=True)) @ dd.T
        every = np.log(np.exp(logits).sum(axis=1))
        golds = np.log(np.where(gold, np.exp(logits), 0.0).sum(axis=1))
        return float(np.mean(every - golds) + params.l2 * np.sum(w * w))

    numeric = np.zeros_like(w)
    for i in range(6):
        for j in range(6):
            step = np.zeros_like(w)
            step[i, j] = 1e-6
            numeric[i, j] = (loss(w + step) - loss(w - step)) / 2e-6
    assert np.allclose(_gradient(w, qd, dd, gold, params), numeric, atol=1e-6)
