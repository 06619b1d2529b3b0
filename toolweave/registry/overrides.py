"""Manifest corrections of the dependency graph: add, remove and pin edges.

Precedence, strongest first:

1. **pinned** edges (``origin="manifest"``) survive everything: inference refreshes, re-ingests of
   their source and ``remove`` entries. Only deleting one of their tools drops them.
2. **remove** entries drop matching declared and inferred edges, and keep future inferred ones out.
3. **declared** edges (from the source) and manifest **add** entries beat inferred edges: an
   inferred edge is never added on a (tool, depends_on) pair that already has one of them, and
   adding one drops the inferred edges of that pair.
4. **learned** edges (``toolweave.registry.learned``: seen in traffic) and **inferred** edges fill in the
   rest; a learned edge is never replaced by an inferred guess of the same key, and neither lands on a
   pair a declared or manifest edge holds or a ``remove`` entry names.

A gateway's manifest is its own: the registry applies it in that gateway's reads only
(``ManifestView``, over the shared graph), never in the edges it commits, so a replica with another
manifest (or none) walks the shared graph as it is, and a gateway that stops leaves nothing behind.
``apply_overrides`` changes a graph in place, for a graph that is one process's alone (an export).
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
    "AUTHORITATIVE",
    "EdgeSelector",
    "GraphOverrides",
    "ManifestView",
    "OverrideReport",
    "add_authoritative",
    "apply_overrides",
    "held",
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


AUTHORITATIVE = frozenset({"declared", "manifest"})
"""Edge origins a person or the tool's source stated (the others are guessed or learned)."""


def held(graph: DependencyGraph, tool_id: str, depends_on: str) -> bool:
    """A declared or manifest edge holds the pair."""
    return any(e.origin in AUTHORITATIVE for e in graph.between(tool_id, depends_on))


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
    """Add inferred edges where no declared/manifest edge holds the pair, no learned edge has the key and
    no ``remove`` forbids it."""
    added = 0
    for e in edges:
        if held(graph, e.tool, e.depends_on) or (overrides is not None and overrides.is_removed(e)):
            continue
        if any(x.key == e.key and x.origin == "learned" for x in graph.between(e.tool, e.depends_on)):
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


_GUESSED = frozenset({"inferred", "learned"})


class ManifestView:
    """A manifest's corrections applied to what one gateway reads of a shared graph (module docstring).

    The same precedence as ``apply_overrides``: pins and adds are present once both tools are, inferred
    and learned edges on a pair they hold are hidden, ``remove`` entries hide what they match (pins
    excepted). Cheap per edge: a manifest lists a handful of entries."""

    def __init__(self, overrides: GraphOverrides | None) -> None:
        self.overrides = overrides
        own: dict[tuple[str, str, EdgeKind, str | None], DependencyEdge] = {}
        if overrides is not None:
            for e in (*overrides.add, *overrides.pin):  # a pin of the same edge replaces its plain add
                own[e.key] = e
        self._own = own
        self._by_tool: dict[str, list[DependencyEdge]] = {}
        for e in own.values():
            self._by_tool.setdefault(e.tool, []).append(e)
        self._pairs = {(e.tool, e.depends_on) for e in own.values()}

    def __bool__(self) -> bool:
        return self.overrides is not None and bool(self._own or self.overrides.remove)

    def keeps(self, edge: DependencyEdge) -> bool:
        """Whether a shared edge stays in this view (it may also be replaced by a manifest edge)."""
        overrides = self.overrides
        if overrides is None:
            return True
        if edge.key in self._own:
            return False
        if edge.origin in _GUESSED and (edge.tool, edge.depends_on) in self._pairs:
            return False
        return not overrides.is_removed(edge)

    def own(self, graph: DependencyGraph, tool_id: str) -> list[DependencyEdge]:
        """The manifest's edges out of ``tool_id`` whose two tools the graph holds."""
        return [
            e
            for e in self._by_tool.get(tool_id, ())
            if e.tool in graph and e.depends_on in graph and e.tool != e.depends_on
        ]

    def dependencies(self, graph: DependencyGraph, tool_id: str) -> list[DependencyEdge]:
        """``graph.dependencies(tool_id)`` as this view shows them."""
        edges = graph.dependencies(tool_id)
        if not self:
            return edges
        return [e for e in edges if self.keeps(e)] + self.own(graph, tool_id)

    def edges(self, graph: DependencyGraph) -> list[DependencyEdge]:
        """Every edge of ``graph`` as this view shows it."""
        if not self:
            return list(graph.edges())
        kept = [e for e in graph.edges() if self.keeps(e)]
        return kept + [e for tool_id in self._by_tool for e in self.own(graph, tool_id)]

    def affected(self, changed: Iterable[str]) -> set[str]:
        """The tools whose view changes when ``changed`` tools come, go or change: a manifest edge out
        of a tool appears once the tool it names exists."""
        changed = set(changed)
        return {e.tool for e in self._own.values() if e.depends_on in changed or e.tool in changed}

    def report(self, graph: DependencyGraph) -> OverrideReport:
        """What the manifest does to ``graph`` in this view, and the entries naming unknown tools."""
        report = OverrideReport()
        overrides = self.overrides
        if overrides is None:
            return report
        report.removed = sum(1 for e in graph.edges() if overrides.is_removed(e))
        for section, edges in (("add", overrides.add), ("pin", overrides.pin)):
            for e in edges:
                missing = [end for end in (e.tool, e.depends_on) if end not in graph]
                if missing:
                    here = overrides.where.get(e.key, f"{section} {e.tool} -> {e.depends_on}")
                    report.problems.append(f"{here}: unknown tool {missing[0]!r}")
                elif e.tool == e.depends_on:
                    report.problems.append(f"tool {e.tool!r} cannot depend on itself")
                elif section == "add":
                    report.added += 1
                else:
                    report.pinned += 1
        return report
