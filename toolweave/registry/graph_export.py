"""The dependency graph as data: a tool's neighbourhood, JSON and GraphML (for Gephi, yEd, Cytoscape).

The HTML picture is a view for people and lives in ``toolweave/views/graph_page.py``.
"""

from __future__ import annotations

import io
import json
from collections.abc import Mapping
from typing import Any

import networkx as nx

from toolweave.errors import ToolNotFound
from toolweave.records import ToolRecord
from toolweave.registry.graph import DependencyGraph

__all__ = ["export_graphml", "export_json", "neighbourhood", "node_doc"]


def neighbourhood(graph: DependencyGraph, tool_id: str, depth: int = 2) -> DependencyGraph:
    """The tools within ``depth`` hops of ``tool_id`` (dependencies and dependents) and their edges."""
    if tool_id not in graph:
        raise ToolNotFound(f"no tool {tool_id!r} in the graph")
    g = graph.nx_graph
    keep = {tool_id}
    frontier = {tool_id}
    for _ in range(max(0, depth)):
        nxt: set[str] = set()
        for n in frontier:
            nxt.update(g.successors(n))
            nxt.update(g.predecessors(n))
        frontier = nxt - keep
        keep |= frontier
    sub = DependencyGraph()
    for n in sorted(keep):
        attrs = g.nodes[n]
        sub.add_tool(n, attrs.get("kind", "regular"), attrs.get("source", ""))
    sub.add_edges(e for e in graph.edges() if e.tool in keep and e.depends_on in keep)
    return sub


# -- JSON / GraphML ------------------------------------------------------------------------------------
def node_doc(graph: DependencyGraph, node: str, tools: Mapping[str, ToolRecord] | None) -> dict[str, Any]:
    attrs = graph.nx_graph.nodes[node]
    doc: dict[str, Any] = {
        "id": node,
        "kind": attrs.get("kind", "regular"),
        "source": attrs.get("source", ""),
    }
    tool = tools.get(node) if tools else None
    if tool is not None:
        doc.update(name=tool.name, description=tool.description)
    return doc


def export_json(graph: DependencyGraph, tools: Mapping[str, ToolRecord] | None = None) -> str:
    """Nodes (with name and description when ``tools`` is given) and typed edges with all their fields."""
    doc = graph.to_json()
    doc["nodes"] = [node_doc(graph, n, tools) for n in graph.nx_graph.nodes]
    return json.dumps(doc, indent=2, ensure_ascii=False)


def export_graphml(graph: DependencyGraph, tools: Mapping[str, ToolRecord] | None = None) -> str:
    """GraphML for Gephi, yEd or Cytoscape: one ``<edge>`` per typed edge (parallel edges allowed)."""
    mg = nx.MultiDiGraph()
    for n in graph.nx_graph.nodes:
        mg.add_node(n, **{k: str(v) for k, v in node_doc(graph, n, tools).items() if k != "id"})
    for e in graph.edges():
        mg.add_edge(
            e.tool,
            e.depends_on,
            kind=str(e.kind),
            origin=e.origin,
            parameter_name=e.parameter_name or "",
            reason=e.reason,
            evidence=e.evidence,
            confidence=float(e.confidence),
        )
    buf = io.BytesIO()
    nx.write_graphml(mg, buf, encoding="utf-8")
    return buf.getvalue().decode("utf-8")
