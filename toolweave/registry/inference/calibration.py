"""How much an inferred edge of each rule can be trusted: its calibrated confidence.

A rule's confidence is the precision its edges had on gold dependency graphs, smoothed toward "no
evidence": ``(matched + 1) / (predicted + 3)``, so a rule seen on few edges stays low and a rule
never checked gets 1/3. Retrieval walks an inferred edge only when its confidence reaches
``Settings.infer_min_confidence``; below that the edge is kept for ``toolweave graph`` only.

``RULE_CONFIDENCE`` is pooled over the gold graphs of ``../shared/datasets`` (toollinkos, api_bank,
openapi_links); ``bench/inference.py --calibrate`` prints the per-dataset table it comes from and the
leave-one-dataset-out values used to judge each dataset on confidences it did not contribute to
(bench/RESULTS.md, "Do-no-harm graph inference").
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
    "auth_rule": 0.987,
    "capability_rule": 0.588,
    "connectivity_prior_rule": NO_EVIDENCE,
    "connectivity_rule": 0.792,
    "entity_id_rule": 0.308,
    "family_rule/core": 0.856,
    "family_rule/optional": NO_EVIDENCE,
    "identity_rule/default-core": 0.792,
    "identity_rule/default-reader": NO_EVIDENCE,
    "identity_rule/name-phrase": 0.918,
    "identity_rule/name-word": 0.857,
    "identity_rule/output": 0.2,
    "producer_rule": 0.25,
    "service_auth_rule": 0.889,
    "similarity": NO_EVIDENCE,
    "state_pair_rule/reader": 0.857,
    "state_pair_rule/setter": 0.857,
    "unit_rule": 0.8,
    "validator_rule": 0.93,
}
"""Calibrated confidence per rule (see the module docstring); a rule missing here gets ``NO_EVIDENCE``."""
