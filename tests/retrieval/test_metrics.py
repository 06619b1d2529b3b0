"""Metrics on hand-computed cases (the ToolLinkOS README's definitions)."""

from __future__ import annotations

import math

import pytest

from toolweave.retrieval.metrics import average_precision, complete, ndcg, precision, recall, summarize


def test_average_precision_normalises_by_min_gold_k() -> None:
    # gold a, c, e; ranked a x c y z: hits at 1 (1/1) and 3 (2/3); divided by min(3, 10) = 3
    assert average_precision(["a", "x", "c", "y", "z"], ["a", "c", "e"], 10) == pytest.approx((1 + 2 / 3) / 3)
    # K smaller than |gold|: divided by K
    assert average_precision(["a", "b"], ["a", "b", "c"], 2) == pytest.approx(1.0)
    assert average_precision(["x", "a"], ["a"], 1) == 0.0
    assert average_precision(["a"], [], 10) == 0.0


def test_recall_complete() -> None:
    assert recall(["a", "x", "c"], ["a", "c", "e", "f"], 10) == pytest.approx(0.5)
    assert recall(["a", "x", "c"], ["a", "c"], 2) == pytest.approx(0.5)
    assert complete(["a", "x", "c"], ["a", "c"], 3) == 1.0
    assert complete(["a", "x", "c"], ["a", "c"], 2) == 0.0


def test_ndcg_binary_gains() -> None:
    # gold a, b; ranked x a b: dcg = 1/log2(3) + 1/log2(4); ideal = 1 + 1/log2(3)
    expected = (1 / math.log2(3) + 1 / math.log2(4)) / (1 + 1 / math.log2(3))
    assert ndcg(["x", "a", "b"], ["a", "b"], 10) == pytest.approx(expected)
    assert ndcg(["a", "b"], ["a", "b"], 10) == pytest.approx(1.0)


def test_summarize_means_over_queries() -> None:
    runs = [(["a", "b"], ["a"]), (["x", "y"], ["y"])]
    out = summarize(runs, (10,))
    assert out["map@10"] == pytest.approx((1.0 + 0.5) / 2)
    assert out["recall@10"] == pytest.approx(1.0)
    assert out["complete@10"] == pytest.approx(1.0)
    assert set(out) == {
        "map@10",
        "recall@10",
        "ndcg@10",
        "complete@10",
        "returned",
        "precision",
        "published_recall",
    }
    assert out["returned"] == pytest.approx(2.0)
    assert out["precision"] == pytest.approx(0.5)
    assert out["published_recall"] == pytest.approx(1.0)


def test_published_figures_count_only_the_published_tools() -> None:
    runs = [(["a", "b", "c"], ["a", "c"]), (["x", "y"], ["y"])]
    out = summarize(runs, (10,), published=[["a", "b"], ["x"]])
    assert out["map@10"] == summarize(runs, (10,))["map@10"]  # ranking figures use the whole list
    assert out["returned"] == pytest.approx(1.5)
    assert out["precision"] == pytest.approx((0.5 + 0.0) / 2)
    assert out["published_recall"] == pytest.approx((0.5 + 0.0) / 2)


def test_precision_of_a_shorter_list() -> None:
    assert precision(["a"], ["a", "b"]) == pytest.approx(1.0)
    assert precision(["a", "x", "y", "z"], ["a"]) == pytest.approx(0.25)
    assert precision([], ["a"]) == pytest.approx(1.0)
