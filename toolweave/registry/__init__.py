"""The registry: tool records in LanceDB, embeddings, and the dependency graph (owns the data).

Names load on first use (``toolweave._lazy``): the manifest imports ``registry.overrides`` without
paying for LanceDB, numpy or networkx.
"""

from typing import TYPE_CHECKING

from toolweave._lazy import lazy_exports

if TYPE_CHECKING:
    from toolweave.registry.catalog import Catalog, load_catalog
    from toolweave.registry.documents import tool_document
    from toolweave.registry.embeddings import Embedder
    from toolweave.registry.graph import DependencyGraph
    from toolweave.registry.registry import IngestSummary, Registry

__all__ = [
    "Catalog",
    "DependencyGraph",
    "Embedder",
    "IngestSummary",
    "Registry",
    "load_catalog",
    "tool_document",
]

__getattr__ = lazy_exports(
    __name__,
    {
        "Catalog": "toolweave.registry.catalog",
        "load_catalog": "toolweave.registry.catalog",
        "tool_document": "toolweave.registry.documents",
        "Embedder": "toolweave.registry.embeddings",
        "DependencyGraph": "toolweave.registry.graph",
        "IngestSummary": "toolweave.registry.registry",
        "Registry": "toolweave.registry.registry",
    },
)
