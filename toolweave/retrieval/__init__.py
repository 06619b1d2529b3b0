"""Graph-fused retrieval: pure functions over a registry-like index (no I/O library is imported here).

Names load on first use (``toolweave._lazy``): the server's meta-tools import ``retrieval.results``
without paying for numpy.
"""

from typing import TYPE_CHECKING

from toolweave._lazy import lazy_exports

if TYPE_CHECKING:
    from toolweave.retrieval.pipeline import SearchIndex, ToolIndex, first_pass, retrieve, retrieve_tools
    from toolweave.retrieval.results import Hit, RankedTool
    from toolweave.retrieval.walk import expand_with_dependencies

__all__ = [
    "Hit",
    "RankedTool",
    "SearchIndex",
    "ToolIndex",
    "expand_with_dependencies",
    "first_pass",
    "retrieve",
    "retrieve_tools",
]

__getattr__ = lazy_exports(
    __name__,
    {
        "SearchIndex": "toolweave.retrieval.pipeline",
        "first_pass": "toolweave.retrieval.pipeline",
        "retrieve": "toolweave.retrieval.pipeline",
        "retrieve_tools": "toolweave.retrieval.pipeline",
        "ToolIndex": "toolweave.retrieval.pipeline",
        "Hit": "toolweave.retrieval.results",
        "RankedTool": "toolweave.retrieval.results",
        "expand_with_dependencies": "toolweave.retrieval.walk",
    },
)
