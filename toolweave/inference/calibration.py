"""How much an inferred edge of each rule can be trusted: its calibrated confidence.

A rule's precision on a gold dependency graph is smoothed toward "no evidence":
``(matched + 1) / (predicted + 3)``, so a rule seen on few edges stays low and a rule never checked
gets 1/3. Gold graphs are grouped by where they come from (``GOLD_FAMILIES``: TaskBench's two tool
graphs are one source, NESTFUL's graph is its own); the shipped confidence of a rule is its *worst
leave-one-family-out* value: pooled over every family but one, for each one left out, the minimum.
A rule confirmed by a single source, typically the one it was designed on, therefore gets no trust
(leaving that source out leaves it without evidence); it needs a second source to agree, and a source
agrees only on ``MIN_PROPOSALS`` pairs or more: one matching pair smooths to exactly the walking bar
(``(1 + 1) / (1 + 3)``), and one pair is no more evidence of a rule than one sighting is of an edge.

Judging a rule on a gold graph *out of sample* runs the same procedure without that graph's family
(``out_of_sample``): a rule walked there was confirmed by two other sources. The retrieval walk
weighs an inferred edge by its confidence (``retrieval.walk``: a weak one only from a clear hit); the
gateway's next steps after a call follow one only when it reaches ``Settings.infer_min_confidence``.

``python bench/inference.py calibrate --table`` counts every rule on every gold graph of
``../shared/datasets`` and prints the ``RULE_CONFIDENCE`` block below, pasted here by hand (a runner never
writes product source; ``tests/registry/inference/test_dataflow_datasets.py`` fails while they differ).
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = [
    "GOLD_FAMILIES",
    "MIN_PROPOSALS",
    "NO_EVIDENCE",
    "RULE_CONFIDENCE",
    "RuleCounts",
    "out_of_sample",
    "pooled",
    "shipped",
    "smoothed_precision",
]

NO_EVIDENCE = 0.333
"""The confidence of a rule that no gold graph has checked: below any sensible walking threshold."""

GOLD_FAMILIES: Mapping[str, str] = {
    "toollinkos": "toollinkos",
    "api_bank": "api_bank",
    "openapi_links": "openapi_links",
    "nestful_graph": "nestful",
    "taskbench_huggingface": "taskbench",
    "taskbench_multimedia": "taskbench",
    "bfcl_multi_turn": "bfcl_code",
}
"""Gold graph (folder of ``../shared/datasets``) → the source it comes from. Two graphs of one source
(one benchmark's authors, one way of drawing edges) count as one piece of evidence."""

MIN_PROPOSALS = 3
"""Pairs a rule must propose on a source's gold graphs for that source to count as evidence for it."""

RuleCounts = Mapping[str, Mapping[str, tuple[int, int]]]
"""Gold graph → rule → (proposed pairs that are gold edges, proposed pairs)."""


def smoothed_precision(matched: int, predicted: int) -> float:
    """``(matched + 1) / (predicted + 3)``: 1/3 without evidence, the precision with plenty."""
    return round((matched + 1) / (predicted + 3), 3)


def pooled(counts: RuleCounts, leave_out: frozenset[str] = frozenset()) -> dict[str, float]:
    """Each rule's smoothed precision over the gold graphs not in ``leave_out``."""
    rules = sorted({r for per in counts.values() for r in per})
    table = {}
    for r in rules:
        kept = [per.get(r, (0, 0)) for graph, per in counts.items() if graph not in leave_out]
        table[r] = smoothed_precision(sum(m for m, _ in kept), sum(p for _, p in kept))
    return table


def _families(counts: RuleCounts, families: Mapping[str, str]) -> dict[str, frozenset[str]]:
    grouped: dict[str, set[str]] = {}
    for graph in counts:
        grouped.setdefault(families.get(graph, graph), set()).add(graph)
    return {family: frozenset(graphs) for family, graphs in grouped.items()}


def shipped(counts: RuleCounts, families: Mapping[str, str] = GOLD_FAMILIES) -> dict[str, float]:
    """Each rule's worst leave-one-family-out confidence: what ``RULE_CONFIDENCE`` holds. A rule whose
    evidence comes from one family alone gets at most ``NO_EVIDENCE`` (the fold without it has none)."""
    groups = _families(counts, families)
    whole = pooled(counts)
    if len(groups) < 2:  # one source cannot confirm anything on its own
        return {r: min(c, NO_EVIDENCE) for r, c in whole.items()}
    folds = [pooled(counts, graphs) for graphs in groups.values()]
    table = {}
    for r in whole:
        worst = min(fold[r] for fold in folds)
        table[r] = worst if _sources(counts, groups, r) >= 2 else min(worst, NO_EVIDENCE)
    return table


def _sources(counts: RuleCounts, groups: Mapping[str, frozenset[str]], rule: str) -> int:
    """How many sources proposed ``rule`` on at least ``MIN_PROPOSALS`` pairs of their gold graphs."""
    return sum(
        sum(counts[g].get(rule, (0, 0))[1] for g in graphs) >= MIN_PROPOSALS for graphs in groups.values()
    )


def out_of_sample(
    counts: RuleCounts, graph: str, families: Mapping[str, str] = GOLD_FAMILIES
) -> dict[str, float]:
    """The table ``shipped`` would give had ``graph``'s family never been seen: the confidences to
    judge that graph (or retrieval on its fleet) with."""
    family = families.get(graph, graph)
    return shipped({g: per for g, per in counts.items() if families.get(g, g) != family}, families)


# -- printed by `python bench/inference.py calibrate --table`; paste its output, do not edit by hand ----
RULE_CONFIDENCE: Mapping[str, float] = {
    "auth_rule": 0.935,
    "capability_rule": NO_EVIDENCE,
    "connectivity_rule": NO_EVIDENCE,
    "dataflow_rule/kind-amount": 0.062,
    "dataflow_rule/kind-locator": NO_EVIDENCE,
    "dataflow_rule/kind-media": NO_EVIDENCE,
    "dataflow_rule/kind-number": 0.013,
    "dataflow_rule/kind-text": 0.165,
    "dataflow_rule/kind-time": 0.125,
    "dataflow_rule/name": 0.167,
    "dataflow_rule/name-id": 0.39,
    "entity_id_rule": 0.267,
    "family_rule/core": NO_EVIDENCE,
    "family_rule/optional": 0.25,
    "identity_rule/default-core": NO_EVIDENCE,
    "identity_rule/name-phrase": NO_EVIDENCE,
    "identity_rule/name-word": 0.273,
    "producer_rule": 0.25,
    "service_auth_rule": 0.562,
    "state_pair_rule/reader": NO_EVIDENCE,
    "state_pair_rule/setter": NO_EVIDENCE,
    "unit_rule": NO_EVIDENCE,
    "validator_rule": 0.25,
}
# -- end of generated table -------------------------------------------------------------------------------
"""Calibrated confidence per rule (see the module docstring); a rule missing here gets ``NO_EVIDENCE``."""
