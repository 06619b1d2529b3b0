"""How much an inferred edge of each rule can be trusted: its calibrated confidence.

A rule's precision on a gold dependency graph is smoothed toward "no evidence":
``(matched + 1) / (predicted + 3)``, so a rule seen on few edges stays low and a rule never checked
gets 1/3. The shipped confidence is the rule's *worst leave-one-dataset-out* value over the gold
graphs of ``../shared/datasets`` (toollinkos, api_bank, openapi_links): pooled over all gold graphs
but one, for each one left out, the minimum. A rule confirmed on a single gold graph — typically the
one it was designed on — therefore gets no trust; it needs a second fleet to agree. Retrieval walks
an inferred edge only when its confidence reaches ``Settings.infer_min_confidence``; below that the
edge is kept for ``toolweave graph`` only.

``bench/inference.py --calibrate toollinkos api_bank openapi_links`` prints the per-dataset table,
the leave-one-dataset-out values and these (bench/RESULTS.md, "Do-no-harm graph inference").
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["NO_EVIDENCE", "RULE_CONFIDENCE", "smoothed_precision"]

NO_EVIDENCE = 0.333
"""The confidence of a rule that no gold graph has checked: below any sensible walking threshold."""


def smoothed_precision(matched: int, predicted: int) -> float:
    """``(matched + 1) / (predicted + 3)``: 1/3 without evidence, the precision with plenty."""
    return round((matched + 1) / (predicted + 3), 3)


RULE_CONFIDENCE: Mapping[str, float] = {
    "auth_rule": 0.913,
    "capability_rule": NO_EVIDENCE,
    "connectivity_prior_rule": NO_EVIDENCE,
    "connectivity_rule": NO_EVIDENCE,
    "entity_id_rule": 0.25,
    "family_rule/core": NO_EVIDENCE,
    "family_rule/optional": NO_EVIDENCE,
    "identity_rule/default-core": NO_EVIDENCE,
    "identity_rule/default-reader": NO_EVIDENCE,
    "identity_rule/name-phrase": NO_EVIDENCE,
    "identity_rule/name-word": NO_EVIDENCE,
    "identity_rule/output": 0.2,
    "producer_rule": 0.25,
    "service_auth_rule": 0.5,
    "similarity": NO_EVIDENCE,
    "state_pair_rule/reader": NO_EVIDENCE,
    "state_pair_rule/setter": NO_EVIDENCE,
    "unit_rule": NO_EVIDENCE,
    "validator_rule": NO_EVIDENCE,
}
"""Calibrated confidence per rule (see the module docstring); a rule missing here gets ``NO_EVIDENCE``."""
