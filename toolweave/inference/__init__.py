"""Infer a typed dependency graph from the tools' own names, descriptions and schemas.

No LLM, no training, no queries: rules over naming conventions and generic vocabulary, plus an
optional embedding-similarity pass with a calibrated threshold. See ``docs/graph.md``.
"""

from __future__ import annotations

from toolweave.inference.evaluate import EdgeScores, score_edges
from toolweave.inference.infer import (
    infer_edges,
    propose_by_rules,
    propose_edges,
    rule_of,
    walkable,
    weighed,
)

__all__ = [
    "EdgeScores",
    "infer_edges",
    "propose_by_rules",
    "propose_edges",
    "rule_of",
    "score_edges",
    "walkable",
    "weighed",
]
