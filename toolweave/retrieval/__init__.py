"""Graph-fused retrieval: pure functions over a registry-like index (no I/O library is imported here)."""

from toolweave.retrieval.fusion import convex_fusion
from toolweave.retrieval.pipeline import SearchIndex, first_pass, retrieve
from toolweave.retrieval.results import Hit, RankedTool
from toolweave.retrieval.walk import expand_with_dependencies

__all__ = [
    "Hit",
    "RankedTool",
    "SearchIndex",
    "convex_fusion",
    "expand_with_dependencies",
    "first_pass",
    "retrieve",
]
