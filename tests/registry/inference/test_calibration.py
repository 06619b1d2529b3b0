"""Calibration: a rule is trusted only when two sources of gold edges agree, and judging a gold graph
out of sample uses the same procedure without that graph's source."""

from __future__ import annotations

from toolweave.inference.calibration import NO_EVIDENCE, out_of_sample, pooled, shipped

BAR = 0.5  # Settings().infer_min_confidence
FAMILIES = {"a": "a", "b": "b", "c": "c", "twin_1": "twin", "twin_2": "twin"}


def test_a_rule_confirmed_by_one_gold_graph_only_stays_below_the_bar() -> None:
    counts = {"a": {"r": (500, 500)}, "b": {}, "c": {}}
    assert pooled(counts)["r"] > 0.99  # all the evidence there is says yes...
    assert shipped(counts, FAMILIES)["r"] <= NO_EVIDENCE < BAR  # ...but it is one source's word


def test_two_graphs_of_one_source_are_one_piece_of_evidence() -> None:
    counts = {"twin_1": {"r": (200, 200)}, "twin_2": {"r": (300, 300)}, "a": {}, "b": {}}
    assert shipped(counts, FAMILIES)["r"] < BAR
    # counted as two sources (no families), the same numbers would lift it
    assert shipped(counts, {})["r"] > BAR


def test_two_sources_that_agree_lift_a_rule_and_one_that_disagrees_pulls_it_down() -> None:
    agree = {"a": {"r": (40, 40)}, "b": {"r": (30, 31)}, "c": {}}
    assert shipped(agree, FAMILIES)["r"] > BAR
    disagree = {**agree, "c": {"r": (0, 40)}}
    assert shipped(disagree, FAMILIES)["r"] < BAR  # the fold without `a` sees b and c: mostly wrong


def test_out_of_sample_needs_two_other_sources() -> None:
    counts = {"a": {"r": (40, 40)}, "b": {"r": (30, 31)}, "c": {}}
    assert shipped(counts, FAMILIES)["r"] > BAR  # shipped: a and b agree
    assert out_of_sample(counts, "a", FAMILIES)["r"] < BAR  # judged on a: only b is left
    counts["c"] = {"r": (20, 20)}
    assert out_of_sample(counts, "a", FAMILIES)["r"] > BAR  # b and c agree without a
    assert out_of_sample(counts, "twin_1", FAMILIES) == shipped(counts, FAMILIES)  # no twin evidence


def test_one_matching_pair_is_no_second_source() -> None:
    # (1 + 1) / (1 + 3) is exactly the bar: a second source's single pair must not lift the rule to it
    counts = {"a": {"r": (155, 167)}, "b": {"r": (1, 1)}, "c": {}}
    assert shipped(counts, FAMILIES)["r"] <= NO_EVIDENCE
    counts["b"] = {"r": (3, 3)}  # three agreeing pairs are evidence
    assert shipped(counts, FAMILIES)["r"] > BAR
