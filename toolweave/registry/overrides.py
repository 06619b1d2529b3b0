"""Manifest corrections of the dependency graph: add, remove and pin edges.

Precedence, strongest first:

1. **pinned** edges (``origin="manifest"``) survive everything: inference refreshes, re-ingests of
   their source and ``remove`` entries. Only deleting one of their tools drops them.
2. **remove** entries drop matching declared and inferred edges, and keep future inferred ones out.
3. **declared** edges (from the source) and manifest **add** entries beat inferred edges: an
   inferred edge is never added on a (tool, depends_on) pair that already has one of them, and
   adding one drops the inferred edges of that pair.
4. **inferred** edges fill in the rest.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from toolweave.errors import GraphError
from toolweave.records import DependencyEdge, EdgeKind

if TYPE_CHECKING:  # networkx only where a graph is used, not for the manifest
    from toolweave.registry.graph import DependencyGraph

__all__ = [
    "EdgeSelector",
    "GraphOverrides",
    "OverrideReport",
    "add_authoritative",
    "apply_overrides",
    "merge_inferred",
]


@dataclass(frozen=True)
class EdgeSelector:
    """Which edges a ``remove`` entry means: a pair, optionally narrowed to a kind and a parameter."""

    tool: str
    depends_on: str
    kind: EdgeKind | None = None
    parameter_name: str | None = None

    def matches(self, edge: DependencyEdge) -> bool:
        return (
            edge.tool == self.tool
            and edge.depends_on == self.depends_on
            and (self.kind is None or edge.kind == self.kind)
            and (self.parameter_name is None or edge.parameter_name == self.parameter_name)
        )


@dataclass
class OverrideReport:
    added: int = 0
    removed: int = 0
    pinned: int = 0
    problems: list[str] = field(default_factory=list)
    """Entries that name tools the graph does not hold: reported, never silently dropped."""


@dataclass
class GraphOverrides:
    """The graph part of a manifest."""

    add: list[DependencyEdge] = field(default_factory=list)
    remove: list[EdgeSelector] = field(default_factory=list)
    pin: list[DependencyEdge] = field(default_factory=list)
    where: dict[tuple[str, str, EdgeKind, str | None], str] = field(default_factory=dict)
    """Where each add/pin entry was written (``gw.yaml:dependencies.add[2]``), for problem reports."""

    @classmethod
    def from_edges(
        cls, edges: Iterable[DependencyEdge], remove: Iterable[EdgeSelector] = ()
    ) -> GraphOverrides:
        """From manifest edges as ``toolweave.manifest.manifest_edges`` makes them: evidence
        ``manifest:pin`` marks a pin, anything else is an add."""
        edges = list(edges)
        return cls(
            add=[e for e in edges if e.evidence != "manifest:pin"],
            remove=list(remove),
            pin=[e for e in edges if e.evidence == "manifest:pin"],
        )

    def is_pinned(self, edge: DependencyEdge) -> bool:
        return any(p.key == edge.key for p in self.pin)

    def is_removed(self, edge: DependencyEdge) -> bool:
        return any(sel.matches(edge) for sel in self.remove) and not self.is_pinned(edge)


def _held(graph: DependencyGraph, tool_id: str, depends_on: str) -> bool:
    """A declared or manifest edge holds the pair."""
    return any(e.origin != "inferred" for e in graph.between(tool_id, depends_on))


def add_authoritative(graph: DependencyGraph, edges: Iterable[DependencyEdge]) -> list[GraphError]:
    """Add declared or manifest edges; inferred edges on the same pairs go (declared beats inferred)."""
    edges = list(edges)
    pairs = {(e.tool, e.depends_on) for e in edges}
    graph.remove_edges(
        lambda e: e.origin == "inferred" and (e.tool, e.depends_on) in pairs, touching={a for a, _b in pairs}
    )
    return graph.add_edges(edges)


def merge_inferred(
    graph: DependencyGraph, edges: Iterable[DependencyEdge], overrides: GraphOverrides | None = None
) -> int:
    """Add inferred edges where no declared/manifest edge holds the pair and no ``remove`` forbids it."""
    added = 0
    for e in edges:
        if _held(graph, e.tool, e.depends_on) or (overrides is not None and overrides.is_removed(e)):
            continue
        if e.tool in graph and e.depends_on in graph and e.tool != e.depends_on:
            graph.add_edge(e)
            added += 1
    return added


def apply_overrides(graph: DependencyGraph, overrides: GraphOverrides) -> OverrideReport:
    """Apply a manifest's corrections; idempotent (apply after every ingest and inference refresh)."""
    report = OverrideReport()
    report.removed = graph.remove_edges(overrides.is_removed)
    for section, edges in (("add", overrides.add), ("pin", overrides.pin)):
        ok = [e for e in edges if e.tool in graph and e.depends_on in graph]
        for e in edges:
            if e not in ok:
                missing = e.tool if e.tool not in graph else e.depends_on
                here = overrides.where.get(e.key, f"{section} {e.tool} -> {e.depends_on}")
                report.problems.append(f"{here}: unknown tool {missing!r}")
        problems = add_authoritative(graph, ok)
        report.problems.extend(str(p) for p in problems)
        if section == "add":
            report.added = len(ok) - len(problems)
        else:
            report.pinned = len(ok) - len(problems)
    return report
