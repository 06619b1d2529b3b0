"""Keep the inferred part of a ``DependencyGraph`` up to date as sources come and go."""

from __future__ import annotations

from collections.abc import Collection, Mapping

import numpy as np

from toolweave.records import ToolRecord
from toolweave.registry.graph import DependencyGraph
from toolweave.registry.inference.infer import infer_edges
from toolweave.registry.overrides import GraphOverrides, merge_inferred

__all__ = ["refresh_inferred_edges"]


def refresh_inferred_edges(
    graph: DependencyGraph,
    tools_by_id: Mapping[str, ToolRecord],
    vectors: Mapping[str, np.ndarray] | None,
    changed_ids: Collection[str],
    *,
    overrides: GraphOverrides | None = None,
) -> int:
    """Recompute the inferred edges from and to ``changed_ids``; returns how many inferred edges were added.

    Args:
        graph: the registry's graph; every tool of ``tools_by_id`` must already be a node.
        tools_by_id: ALL tools now in the registry (new and old), by id.
        vectors: their embeddings by id, or ``None`` (rules only).
        changed_ids: ids added or whose content changed in this ingest. Removed tools need nothing
            here: ``graph.remove_tools`` already dropped their edges.
        overrides: the manifest's corrections: ``remove`` entries keep matching edges out.

    Edges among untouched tools stay as they are. Tools of a source that declares its own edges
    get no inferred outgoing edges (the source's author already said what they need), and a pair
    that holds a declared or manifest edge never gets an inferred one.
    """
    changed = {i for i in changed_ids if i in tools_by_id}
    graph.remove_edges(lambda e: e.origin == "inferred" and (e.tool in changed or e.depends_on in changed))
    if not changed:
        return 0
    declaring = {
        tools_by_id[e.tool].source for e in graph.edges() if e.origin == "declared" and e.tool in tools_by_id
    }
    edges = infer_edges(list(tools_by_id.values()), vectors=vectors, only_for=changed)
    edges = [e for e in edges if tools_by_id[e.tool].source not in declaring]
    return merge_inferred(graph, edges, overrides)
