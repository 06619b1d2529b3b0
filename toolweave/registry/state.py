"""What one process holds of an open registry, shared by the registry's parts.

``Registry`` (``toolweave.registry.registry``) is a façade over parts with one job each: the snapshot
search (``search.py``), the follower that loads committed generations (``follower.py``), the commit
door every write goes through (``commits.py``), ingest (``ingest.py``), the usage book and its batched
observations (``usage_book.py``, ``observations.py``), the vector-index upkeep (``vector_upkeep.py``) and
the source specs (``sources.py``). They share this state: open table handles and the in-memory read
model. The read model (snapshot, walk map, edge tuple) is replaced whole, never changed in place, so a
search on another thread reads one consistent version without a lock; everything else is changed only
under ``write_lock``.
"""

from __future__ import annotations

import threading

from toolweave.inference import weighed
from toolweave.records import DependencyEdge
from toolweave.registry.changes import Changes, Delta
from toolweave.registry.database import RegistryDatabase, RegistryLocation
from toolweave.registry.embeddings import Embedder
from toolweave.registry.fleet_fit import FleetMap
from toolweave.registry.graph import DependencyGraph
from toolweave.registry.overrides import GraphOverrides, ManifestView
from toolweave.registry.snapshot import Snapshot
from toolweave.registry.sources import SourceSpec
from toolweave.settings import Settings

__all__ = ["RegistryState"]


class RegistryState:
    """The open registry's handles and read model (see the module docstring)."""

    def __init__(
        self, path: RegistryLocation, embedder: Embedder, settings: Settings, database: RegistryDatabase
    ) -> None:
        self.path = path
        self.embedder = embedder
        """Embeds queries and documents; a gateway may wrap it (a query batcher) after open."""
        self.settings = settings
        self.db = database
        self.table = database.tool_table()
        self.usage = database.usage_table()
        self.write_lock = threading.RLock()
        """Serialises this process's writes (the writer lock serialises processes)."""
        self.changes = Changes()
        """What the write in progress changed, for followers (``changes.py``); under ``write_lock``."""
        self.snap = Snapshot()
        self.graph = DependencyGraph()
        """The graph writes change (networkx); searches read ``deps`` and ``edges`` instead."""
        self.deps: dict[str, tuple[DependencyEdge, ...]] = {}
        """Tool id → the edges the retrieval walk may follow (weak inferred ones left out)."""
        self.edges: tuple[DependencyEdge, ...] = ()
        self.view = ManifestView(None)
        """This gateway's manifest over the shared graph, in its reads alone (``overrides.ManifestView``):
        never loaded from the registry, never committed to it; under ``write_lock``."""
        self.sources: tuple[SourceSpec, ...] = ()
        self.fleet_map: FleetMap | None = None
        """The fleet's request map searches apply (``fleet_map.py``); replaced whole, never changed."""
        self.loaded_generation = -1
        """The committed generation the snapshot shows (``Follower.refresh`` compares it with the stored
        one)."""
        self.unloaded: Delta = {}
        """Changes of the loaded generation's commits not yet read into the read model: a write that
        does not read them leaves them (``Follower.catch_up``); the next poll or write loads them."""
        self.foreign_loads = 0
        """Other processes' commits loaded, by a refresh or by a write catching up."""
        self.full_loads = 0
        """Times every table was read whole (open, rollback, a change the commit log cannot describe)."""
        self.delta_loads = 0
        """Other processes' commits loaded as their changes alone (``Follower.follow``)."""

    @property
    def usage_on(self) -> bool:
        return self.settings.usage_weight > 0

    @property
    def overrides(self) -> GraphOverrides | None:
        return self.view.overrides

    def swap_in_graph(self, *, everything: bool = False) -> None:
        """Swap in what searches read of the graph: the walk map and the edge tuple, as this gateway's
        manifest shows them (``view``). ``everything``: redo every tool (the manifest changed).

        Searches run on other threads while a write changes the networkx graph: they read these
        immutable copies, never the graph being changed. Retrieval is given the edges it may walk
        (``inference.weighed``): weak learned ones stay in the graph, unwalked; inferred ones of any
        confidence go to the walk, which weighs them by it."""
        graph, view = self.graph, self.view
        floor = self.settings.infer_min_confidence
        changed = graph.take_changed()
        if changed is None or everything:  # a graph just built (open, rollback, another's commit)
            deps = {
                tool: tuple(weighed(view.dependencies(graph, tool), floor)) for tool in graph.nx_graph.nodes
            }
        else:  # the tools this write changed: at 100k tools, redoing every one was a tenth of an ingest
            deps = dict(self.deps)
            for tool in changed | view.affected(changed):
                if tool in graph:
                    deps[tool] = tuple(weighed(view.dependencies(graph, tool), floor))
                else:
                    deps.pop(tool, None)
        self.deps = deps
        self.edges = tuple(view.edges(graph))
