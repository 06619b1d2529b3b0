"""The dependency graph: a networkx DiGraph, the in-memory read model of the registry's edge table.

``save``/``load`` read and write the old ``graph.json`` format (registries are migrated from it, see
``toolweave.registry.database``; ``graph export`` formats live in ``graph_export``).

An edge ``A -> B`` means "A depends on B" (walk successors to collect what a tool needs). Parallel
edges of different kinds or parameters between the same pair are kept as a list on the one
networkx edge, so a tool that needs another for two parameters says so twice.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import networkx as nx
from pydantic import ValidationError

from toolweave.errors import GraphError
from toolweave.records import DependencyEdge, EdgeKind, ToolKind

__all__ = ["GRAPH_FILE", "DependencyGraph"]

GRAPH_FILE = "graph.json"
_FORMAT = "toolweave-graph/1"


class DependencyGraph:
    """Typed tool-dependency graph. Nodes are tool ids with a ``kind``; edges carry ``DependencyEdge``s."""

    def __init__(self) -> None:
        self._g: nx.DiGraph = nx.DiGraph()

    # -- nodes ---------------------------------------------------------------------------------------
    def add_tool(self, tool_id: str, kind: ToolKind = "regular", source: str = "") -> None:
        self._g.add_node(tool_id, kind=kind, source=source)

    def remove_tools(self, tool_ids: Iterable[str]) -> None:
        self._g.remove_nodes_from(list(tool_ids))

    def __contains__(self, tool_id: object) -> bool:
        return tool_id in self._g

    def __len__(self) -> int:
        return int(self._g.number_of_nodes())

    def kind(self, tool_id: str) -> ToolKind:
        kind: ToolKind = self._g.nodes[tool_id].get("kind", "regular")
        return kind

    @property
    def nx_graph(self) -> nx.DiGraph:
        """The underlying networkx graph (read it; change it only through this class)."""
        return self._g

    # -- edges ---------------------------------------------------------------------------------------
    def add_edge(self, edge: DependencyEdge) -> None:
        """Add one typed edge. Both tools must be known: a dangling edge is an error, never dropped."""
        for end in (edge.tool, edge.depends_on):
            if end not in self._g:
                raise GraphError(
                    f"edge {edge.tool} -> {edge.depends_on} ({edge.kind}) names unknown tool {end!r}"
                )
        if edge.tool == edge.depends_on:
            raise GraphError(f"tool {edge.tool!r} cannot depend on itself")
        data = self._g.get_edge_data(edge.tool, edge.depends_on)
        if data is None:
            self._g.add_edge(edge.tool, edge.depends_on, edges=[edge])
            return
        kept = [e for e in data["edges"] if e.key != edge.key]
        data["edges"] = [*kept, edge]

    def add_edges(self, edges: Iterable[DependencyEdge]) -> list[GraphError]:
        """Add many edges; returns the problems (unknown tools) instead of stopping at the first."""
        problems: list[GraphError] = []
        for edge in edges:
            try:
                self.add_edge(edge)
            except GraphError as exc:
                problems.append(exc)
        return problems

    def remove_edges(self, predicate: Any) -> int:
        """Drop every edge for which ``predicate(edge)`` is true; returns how many went."""
        removed = 0
        for a, b, data in list(self._g.edges(data=True)):
            kept = [e for e in data["edges"] if not predicate(e)]
            removed += len(data["edges"]) - len(kept)
            if kept:
                data["edges"] = kept
            else:
                self._g.remove_edge(a, b)
        return removed

    def edges(self) -> Iterator[DependencyEdge]:
        for _a, _b, data in self._g.edges(data=True):
            yield from data["edges"]

    def dependencies(self, tool_id: str, kinds: Sequence[EdgeKind] | None = None) -> list[DependencyEdge]:
        """Edges out of ``tool_id`` (what it needs), in insertion order, optionally of some kinds only."""
        if tool_id not in self._g:
            return []
        out: list[DependencyEdge] = []
        for _b, data in self._g.adj[tool_id].items():
            out.extend(e for e in data["edges"] if kinds is None or e.kind in kinds)
        return out

    def dependents(self, tool_id: str) -> list[DependencyEdge]:
        """Edges into ``tool_id`` (who needs it)."""
        if tool_id not in self._g:
            return []
        return [e for _a, data in self._g.pred[tool_id].items() for e in data["edges"]]

    # -- persistence ---------------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        nodes = [{"id": n, **attrs} for n, attrs in self._g.nodes(data=True)]
        edges = [e.model_dump(mode="json") for e in self.edges()]
        return {"format": _FORMAT, "nodes": nodes, "edges": edges}

    @classmethod
    def from_json(cls, doc: Mapping[str, Any], *, where: str = "graph") -> DependencyGraph:
        if doc.get("format") != _FORMAT:
            raise GraphError(f"{where}: not a toolweave graph (format {doc.get('format')!r})")
        graph = cls()
        try:
            for node in doc.get("nodes", []):
                graph.add_tool(node["id"], node.get("kind", "regular"), node.get("source", ""))
            problems = graph.add_edges(DependencyEdge.model_validate(e) for e in doc.get("edges", []))
        except (KeyError, TypeError, AttributeError, ValidationError) as exc:  # a hand-edited or damaged file
            raise GraphError(f"{where}: malformed dependency graph: {exc!r}") from exc
        if problems:
            raise GraphError(f"{where}: {problems[0]}")
        return graph

    def save(self, directory: Path) -> Path:
        """Write atomically (temp file + rename): a crash leaves the old graph, never half a new one."""
        target = directory / GRAPH_FILE
        fd, tmp = tempfile.mkstemp(prefix=".graph-", suffix=".json", dir=directory)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(self.to_json(), f, separators=(",", ":"))
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return target

    @classmethod
    def load(cls, directory: Path) -> DependencyGraph:
        path = directory / GRAPH_FILE
        if not path.exists():
            return cls()
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise GraphError(f"{path}: cannot read the dependency graph: {exc}") from exc
        if not isinstance(doc, dict):
            raise GraphError(f"{path}: not a toolweave graph (a JSON {type(doc).__name__}, not an object)")
        return cls.from_json(doc, where=str(path))
