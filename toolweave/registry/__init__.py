"""The registry: tool records in LanceDB, embeddings, and the dependency graph (owns the data)."""

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
