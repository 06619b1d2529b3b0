"""Precision-first inference rules over ``ToolProfile``s, one module per family.

Each rule is a generator of ``DependencyEdge``s with ``origin="inferred"``, a ``reason`` a person can
read, the ``evidence`` (which words or fields matched) and, once calibrated, a ``confidence``:

* ``auth``: credentials from a login or token tool of the same service;
* ``parameters``: inputs named like what another tool returns, context defaults, validators,
  ``<thing>_id`` producers, unit conversions;
* ``value_kinds``: typed inputs (timestamps, coordinates, emails, URLs, paths) from the tool that
  makes that kind;
* ``environment``: capability status checks, read/change pairs, connectivity;
* ``dataflow``: inputs filled by what another tool's output schema returns, by name or by kind.
"""

from __future__ import annotations

from toolweave.inference.rules.auth import auth_rule, service_auth_rule
from toolweave.inference.rules.base import EdgeText, Rule, Scope
from toolweave.inference.rules.dataflow import dataflow_rule
from toolweave.inference.rules.environment import (
    capability_rule,
    connectivity_prior_rule,
    connectivity_rule,
    state_pair_rule,
)
from toolweave.inference.rules.parameters import (
    entity_id_rule,
    family_rule,
    identity_rule,
    unit_rule,
    validator_rule,
)
from toolweave.inference.rules.value_kinds import producer_rule

__all__ = ["RULES", "EdgeText", "Rule", "Scope"]

RULES: tuple[Rule, ...] = (
    auth_rule,
    service_auth_rule,
    identity_rule,
    validator_rule,
    family_rule,
    entity_id_rule,
    unit_rule,
    capability_rule,
    state_pair_rule,
    connectivity_rule,
    connectivity_prior_rule,
    producer_rule,
    dataflow_rule,
)
"""Every rule, in the order they run (the order of their proposals, before one edge per pair is kept)."""
