"""The follower: brings this process's read model to the registry's committed generation.

At open and after a rollback it loads everything the commit record names: tools (the snapshot), usage
examples, edges (the graph), overrides, source specs and traffic evidence. When a write catches up under the
writer lock, and when a gateway polls (``refresh``), it loads only what the commits since its generation
changed (``toolweave.registry.changes``): the rows of the touched sources, the outgoing edges of the touched
tools, the usage examples of the touched tools, each read at the committed version with a filter, and merged
into the snapshot and graph it holds. A usage flush of another replica therefore costs a follower a read of
the flushed tools' examples, not of the registry. It loads everything when the commit log cannot describe
the change. Nothing a writer has not committed is ever read. See docs/registry.md ("Replicas").

A new kind of committed change (a new table's) is followed by adding a loader to ``appliers`` under
the kind's name; a kind without one makes the follower load everything (safe, only slower).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Mapping

import numpy as np

from toolweave.errors import RegistryError
from toolweave.records import DependencyEdge, ToolRecord
from toolweave.registry.changes import Delta, since, union
from toolweave.registry.database import CommitRecord, graph_from_rows
from toolweave.registry.learned import LearnedEdgeBook
from toolweave.registry.models import same_vectors
from toolweave.registry.snapshot import Snapshot
from toolweave.registry.sources import SourceSpec
from toolweave.registry.state import RegistryState
from toolweave.registry.store import CompactRecords
from toolweave.registry.usage_book import UsageBook
from toolweave.registry.vector_index import index_state

__all__ = ["Applier", "Deferrable", "Follower"]

log = logging.getLogger(__name__)

Applier = Callable[[list[str] | None], None]
"""Loads one kind's changed keys (None: all of them) at the committed versions now open."""
Deferrable = Callable[[str, list[str] | None], bool]
"""Whether a write may leave a kind's changed keys unloaded (``RegistryState.unloaded``) while it holds
the writer lock: its write reads none of them."""


class Follower:
    """Loads committed generations into the shared ``RegistryState``."""

    def __init__(self, state: RegistryState, usage: UsageBook, learned: LearnedEdgeBook) -> None:
        self._state = state
        self._usage = usage
        self._learned = learned
        self.appliers: dict[str, Applier] = {
            "sources": lambda _keys: self._load_sources(),
            "tools": self._tools_changed,
            "edges": self._edges_changed,
            "usage": self._usage_changed,
            "traffic": lambda _keys: self._learned.load(),  # the evidence is small: read it whole
        }
        """Kind of change → its loader, applied in this order (rows before the edges between them)."""
        self.whole: list[Callable[[], None]] = []
        """Loaders of the parts a full load reads besides these (a part registers its own)."""

    # -- everything ----------------------------------------------------------------------------------
    def load_committed(self) -> None:
        """Snapshot, graph, usage, source specs and traffic evidence from the committed tables (the
        manifest's overrides are this gateway's own: ``RegistryState.view``, kept as they are)."""
        state, db = self._state, self._state.db
        state.table = db.tool_table()
        state.usage = db.usage_table()
        self._usage.load()
        self._load_sources()
        state.loaded_generation = db.committed_generation()
        self.reload()
        state.graph = graph_from_rows(state.snap.nodes(), shared_edges(db.side.load_edges()))
        self._learned.load()
        for load in self.whole:
            load()
        state.swap_in_graph()
        state.unloaded = {}
        state.full_loads += 1

    def reload(self, sources: Collection[str] | None = None) -> None:
        """A new snapshot from the tool table (as this handle sees it: a writer sees its own rows):
        every row, or (``sources``) those sources' rows merged into the snapshot held."""
        state = self._state
        table = state.table
        ann = table.count() >= state.settings.vector_index_threshold
        last = state.snap
        if sources is not None and ann != last.ann:
            sources = None  # crossed the vector-index threshold: the snapshot changes shape
        keep = (
            [] if sources is None else [n for n, i in enumerate(last.ids) if last.sources[i] not in sources]
        )
        kept = [last.ids[n] for n in keep]
        records: Mapping[str, ToolRecord]
        if ann:  # neither vectors nor decoded records in memory: see docs/registry.md "Large registries"
            id_list, source_list, hash_list, name_list, compact = table.load_compact(sources)
            if kept and isinstance(last.records, CompactRecords):
                compact = last.records.merged(kept, compact)
            records = compact
            matrix = np.zeros((0, 1), np.float32)
        else:
            rows = table.load_all(sources)
            id_list = [r.record.id for r in rows]
            source_list = [r.record.source for r in rows]
            hash_list = [r.content_hash for r in rows]
            name_list = [r.record.name for r in rows]
            decoded = {i: last.records[i] for i in kept}
            decoded.update((r.record.id, r.record) for r in rows)
            records = decoded
            vectors = [last.matrix[n] for n in keep] + [r.vector for r in rows]
            matrix = np.stack(vectors) if vectors else np.zeros((0, 1), np.float32)
        fresh_names = dict(zip(id_list, name_list, strict=True))  # the vocabulary counts added ids only
        ids = (*kept, *id_list)
        source_list = [last.sources[i] for i in kept] + source_list
        hash_list = [last.hashes[i] for i in kept] + hash_list
        names = tuple(sorted(set(source_list)))
        code = {name: n for n, name in enumerate(names)}
        usage_rows, usage_matrix = self._usage.snapshot_rows(ids)
        state.snap = Snapshot(
            ids=ids,
            matrix=matrix,
            records=records,
            hashes=dict(zip(ids, hash_list, strict=True)),
            sources=dict(zip(ids, source_list, strict=True)),
            source_codes=np.fromiter((code[s] for s in source_list), np.int32, len(ids)),
            source_names=names,
            usage_rows=usage_rows,
            usage_matrix=usage_matrix,
            ann=ann,
            ann_refine=ann and not index_state(table).exact,
            names=last.names.following(last.ids, ids, fresh_names),
        )  # ``rows``: read by the first search (in the background), not on the ingest's or open's path
        if sources is not None:
            state.graph.remove_tools(set(last.ids) - set(ids))
        for tool_id, kind, source in state.snap.nodes():  # graph nodes follow the rows (rebuilt at open)
            if tool_id not in state.graph:
                state.graph.add_tool(tool_id, kind, source)

    # -- other processes' commits ----------------------------------------------------------------------
    def catch_up(self, defer: Deferrable | None = None) -> None:
        """Under the writer lock: roll back what a dead writer left uncommitted, and load what others
        committed since this snapshot, so a write builds on the newest registry. ``defer``: the kinds
        the write does not read may stay unloaded until the next poll or write (a usage flush after a
        2,000-tool commit of a long ingest: reading those rows held the lock seconds, for every
        replica's flush)."""
        state = self._state
        head = state.db.recover()
        if head is None:
            raise RegistryError(f"registry {state.path} lost its commit record")
        if head.generation != state.loaded_generation or state.unloaded:
            self.follow(head, defer)
        else:  # same state: handles opened at an older committed version may be read-only
            state.table.writable()
            state.usage.writable()

    def follow(self, head: CommitRecord, defer: Deferrable | None = None) -> None:
        """Load generation ``head`` (the commit record just read): its changes since the loaded
        generation when the commit log describes them (and those left unloaded before), else
        everything. ``defer``: see ``catch_up``."""
        state = self._state
        delta = since(head.log, state.loaded_generation, head.generation)
        state.foreign_loads += 1
        if delta is None or any(kind not in self.appliers for kind in delta):
            self.load_committed()
            return
        delta = union(state.unloaded, delta)
        later = {k: v for k, v in delta.items() if defer is not None and defer(k, v)}
        try:
            self._apply({k: v for k, v in delta.items() if k not in later})
        except Exception as exc:  # a half-applied change must not stay: the whole committed state instead
            log.warning("registry %s: loading the changes failed (%s); loading everything", state.path, exc)
            self.load_committed()
            return
        state.loaded_generation = head.generation
        state.unloaded = later
        state.delta_loads += 1

    def _apply(self, delta: Delta) -> None:
        state, db = self._state, self._state.db
        state.table = db.tool_table()  # the committed versions: cheap handles, nothing read yet
        state.usage = db.usage_table()
        for kind, apply in self.appliers.items():
            if kind in delta:
                apply(delta[kind])
        if "tools" in delta or "edges" in delta:  # the graph's nodes or edges changed (tens of thousands)
            state.swap_in_graph()

    def _load_sources(self) -> None:
        self._state.sources = tuple(SourceSpec(**row) for row in self._state.db.side.load_sources())

    def _tools_changed(self, sources: list[str] | None) -> None:
        if sources is None or sources:  # none: the table moved (an index, a compaction), no row changed
            self.reload(None if sources is None else set(sources))

    def _edges_changed(self, tools: list[str] | None) -> None:
        state = self._state
        if tools is None:
            state.graph = graph_from_rows(state.snap.nodes(), shared_edges(state.db.side.load_edges()))
            return
        touched = set(tools)
        state.graph.remove_edges(lambda e: e.tool in touched, touching=touched)
        problems = state.graph.add_edges(shared_edges(state.db.side.load_edges(touched)))
        if problems:
            log.warning(
                "dependency edges naming unknown tools skipped: %d (first: %s)", len(problems), problems[0]
            )

    def _usage_changed(self, tools: list[str] | None) -> None:
        self._usage.load(None if tools is None else set(tools))
        self._usage.swap_in()

    # -- polling ---------------------------------------------------------------------------------------
    def current(self) -> bool:
        """Whether the snapshot shows the newest committed generation (one small read), every change
        of it loaded."""
        state = self._state
        return not state.unloaded and state.db.generation() == state.loaded_generation

    def refresh(self) -> bool:
        """Load the newest committed generation when another process committed one (a gateway polls
        this every ``Settings.registry_poll_s``); False, after reading one small row, when nothing
        changed."""
        state = self._state
        if self.current():
            return False
        # a write of this process under way (a flush waiting for the fleet's writer lock while Redis is
        # down, an ingest) catches up with the newest commit itself: the poll does not wait behind it
        # (it would report the store as unreachable when only the lock is), and the next poll follows
        if not state.write_lock.acquire(blocking=False):
            return False
        try:
            head = state.db.reread_head()
            if head.generation == state.loaded_generation and not state.unloaded:
                return False
            if not same_vectors(head.embedding_model, state.embedder.model_id):
                log.error(
                    "registry %s was re-indexed with %s by another process; restart with that model",
                    state.path,
                    head.embedding_model,
                )
                return False
            full = state.full_loads
            self.follow(head)
        finally:
            state.write_lock.release()
        how = "everything" if state.full_loads > full else "its changes"
        log.info("registry %s: loaded generation %d (%s): %s", state.path, head.generation, head.action, how)
        return True


def shared_edges(edges: list[DependencyEdge]) -> list[DependencyEdge]:
    """The committed edges less what an older version's gateway wrote from its manifest (evidence
    ``manifest:add`` / ``manifest:pin``): a manifest is now applied in its gateway's view alone, and
    those rows leave the table with the next graph commit instead of staying after the gateway left."""
    return [e for e in edges if not (e.origin == "manifest" and e.evidence.startswith("manifest:"))]
