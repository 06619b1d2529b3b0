"""Infer a typed dependency graph from the tools' own names, descriptions and schemas.

No LLM, no training, no queries: rules over naming conventions and generic vocabulary, plus an
optional embedding-similarity pass with a calibrated threshold. See ``docs/graph.md``.
"""

from __future__ import annotations

from toolweave.registry.inference.evaluate import EdgeScores, score_edges
from toolweave.registry.inference.incremental import ProfileCache, infer_for, refresh_inferred_edges
from toolweave.registry.inference.infer import (
    infer_edges,
    propose_by_rules,
    propose_edges,
    rule_of,
    walkable,
    weighed,
)

__all__ = [
    "EdgeScores",
    "ProfileCache",
    "infer_edges",
    "infer_for",
    "propose_by_rules",
    "propose_edges",
    "refresh_inferred_edges",
    "rule_of",
    "score_edges",
    "walkable",
    "weighed",
]
