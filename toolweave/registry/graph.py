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
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import networkx as nx
from pydantic import ValidationError

from toolweave.errors import GraphError
from toolweave.records import DependencyEdge, EdgeKind, ToolKind

__all__ = ["GRAPH_FILE", "DependencyGraph", "copied"]

GRAPH_FILE = "graph.json"
_FORMAT = "toolweave-graph/1"


class DependencyGraph:
    """Typed tool-dependency graph. Nodes are tool ids with a ``kind``; edges carry ``DependencyEdge``s."""

    def __init__(self) -> None:
        self._g: nx.DiGraph = nx.DiGraph()
        # Tools whose outgoing edges changed since ``take_changed`` last asked (None: all of them, as
        # after loading): a registry swaps in again what retrieval walks for these alone, not 100k tools.
        self._changed: set[str] | None = None
        # Tools with a declared outgoing edge: inference leaves their sources alone, and finding them
        # by scanning every edge cost an ingest at 100k tools more than its own edges did.
        self._declaring: set[str] = set()

    # -- nodes ---------------------------------------------------------------------------------------
    def add_tool(self, tool_id: str, kind: ToolKind = "regular", source: str = "") -> None:
        self._g.add_node(tool_id, kind=kind, source=source)
        self._note(tool_id)

    def remove_tools(self, tool_ids: Iterable[str]) -> None:
        gone = {t for t in tool_ids if t in self._g}
        dependents = {a for tool_id in gone for a in self._g.pred[tool_id]} - gone  # they lose an edge
        self._g.remove_nodes_from(gone)
        self._note(*gone, *dependents)
        self._declaring -= gone
        for tool_id in dependents:
            self._recheck_declaring(tool_id)

    def take_changed(self) -> set[str] | None:
        """The tools whose outgoing edges (or existence) changed since the last call; None means
        every tool (nothing was asked since the graph was built). Asking resets the record."""
        changed, self._changed = self._changed, set()
        return changed

    def peek_changed(self) -> set[str] | None:
        """What ``take_changed`` would answer, without resetting it (a commit notes it for followers)."""
        return None if self._changed is None else set(self._changed)

    def declaring(self) -> set[str]:
        """The tools that have at least one declared outgoing edge."""
        return set(self._declaring)

    def _note(self, *tool_ids: str) -> None:
        if self._changed is not None:
            self._changed.update(tool_ids)

    def _recheck_declaring(self, tool_id: str) -> None:
        if tool_id in self._declaring and not any(e.origin == "declared" for e in self.dependencies(tool_id)):
            self._declaring.discard(tool_id)

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
        self._note(edge.tool)
        data = self._g.get_edge_data(edge.tool, edge.depends_on)
        if data is None:
            self._g.add_edge(edge.tool, edge.depends_on, edges=[edge])
        else:
            kept = [e for e in data["edges"] if e.key != edge.key]
            data["edges"] = [*kept, edge]
        if edge.origin == "declared":
            self._declaring.add(edge.tool)
        else:  # it may have replaced the tool's declared edge of the same key (a manifest pin does)
            self._recheck_declaring(edge.tool)

    def add_edges(self, edges: Iterable[DependencyEdge]) -> list[GraphError]:
        """Add many edges; returns the problems (unknown tools) instead of stopping at the first."""
        problems: list[GraphError] = []
        for edge in edges:
            try:
                self.add_edge(edge)
            except GraphError as exc:
                problems.append(exc)
        return problems

    def remove_edges(self, predicate: Any, *, touching: Collection[str] | None = None) -> int:
        """Drop every edge for which ``predicate(edge)`` is true; returns how many went.

        ``touching``: look only at the edges with an end among these tools (the predicate must be false
        for every other edge). An ingest's edges touch what it changed, and the cost then follows the
        change instead of the whole graph (at 100k tools each full scan took a third of a second)."""
        removed = 0
        for a, b, data in list(self._pairs(touching)):
            kept = [e for e in data["edges"] if not predicate(e)]
            if len(kept) == len(data["edges"]):
                continue
            removed += len(data["edges"]) - len(kept)
            self._note(a)
            if kept:
                data["edges"] = kept
            else:
                self._g.remove_edge(a, b)
            self._recheck_declaring(a)
        return removed

    def edges(self, *, touching: Collection[str] | None = None) -> Iterator[DependencyEdge]:
        """Every edge; with ``touching``, the edges with an end among those tools."""
        for _a, _b, data in self._pairs(touching):
            yield from data["edges"]

    def inferred_dependents(self, tool_ids: Collection[str]) -> set[str]:
        """The other tools with an inferred edge to one of ``tool_ids``."""
        return {
            e.tool
            for e in self.edges(touching=tool_ids)
            if e.origin == "inferred" and e.depends_on in tool_ids and e.tool not in tool_ids
        }

    def between(self, tool_id: str, depends_on: str) -> list[DependencyEdge]:
        """The edges ``tool_id -> depends_on`` (of every kind and parameter)."""
        data = self._g.get_edge_data(tool_id, depends_on)
        return [] if data is None else list(data["edges"])

    def _pairs(self, touching: Collection[str] | None) -> Iterator[tuple[str, str, dict[str, Any]]]:
        if touching is None:
            yield from self._g.edges(data=True)
            return
        g = self._g
        ends = {t for t in touching if t in g}
        for tool_id in ends:
            for b, data in g.succ[tool_id].items():
                yield tool_id, b, data
            for a, data in g.pred[tool_id].items():
                if a not in ends:  # an edge between two of them came out of ``a`` already
                    yield a, tool_id, data

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


def copied(graph: DependencyGraph) -> DependencyGraph:
    """An independent copy of ``graph`` (a write builds its graph on one before it takes the writer lock).

    networkx copies each edge's data dict; the edge lists in them are shared, which is safe because
    ``DependencyGraph`` never changes one in place (it assigns a new list)."""
    other = DependencyGraph()
    other._g = graph._g.copy()
    other._changed = None if graph._changed is None else set(graph._changed)
    other._declaring = set(graph._declaring)
    return other
