"""Ingest, the writer path for tools and edges: check, embed, graph update, inference, commit.

``Ingest.ingest`` checks everything before it writes anything (a tool of another source, a duplicate
id, an edge to an unknown tool raise, and the registry keeps what it held), embeds only tools whose
content changed (hash-based), writes the rows, updates the graph with the source's declared edges,
re-infers the edges the change touches, and commits; a failure half-way rolls back to the last
commit (``Commits``). ``add_edges`` and the repair at open change the graph alone; ``set_overrides`` changes
nothing stored (a manifest is applied in its gateway's view).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Collection, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass

import numpy as np

from toolweave.errors import GraphError, RegistryError
from toolweave.inference import propose_by_rules
from toolweave.inference.producers import ToolProfile
from toolweave.records import DependencyEdge, ToolRecord
from toolweave.registry.commits import Commits
from toolweave.registry.documents import tool_document
from toolweave.registry.embeddings import Progress, embed_chunked
from toolweave.registry.follower import Follower
from toolweave.registry.graph import DependencyGraph, copied
from toolweave.registry.inferred_edges import ProfileCache, infer_for, refresh_inferred_edges
from toolweave.registry.lock import LOCK_POLL_MAX_S
from toolweave.registry.overrides import (
    GraphOverrides,
    ManifestView,
    OverrideReport,
    add_authoritative,
    merge_inferred,
)
from toolweave.registry.search import SnapshotSearch
from toolweave.registry.snapshot import Snapshot
from toolweave.registry.state import RegistryState
from toolweave.registry.store import StoredTool
from toolweave.registry.summary import IngestSummary
from toolweave.registry.usage_book import UsageBook
from toolweave.registry.vector_upkeep import VectorIndexUpkeep

__all__ = ["Ingest"]

log = logging.getLogger(__name__)

WRITE_CHUNK = 2_000
"""Changed tools per write of a large ingest (``Ingest.ingest``): the writer lock is held for one
chunk's write and commit at a time (seconds), and released between them."""


class Ingest:
    """Writes tools and dependency edges (see the module docstring)."""

    def __init__(
        self,
        state: RegistryState,
        follower: Follower,
        commits: Commits,
        usage: UsageBook,
        reads: SnapshotSearch,
        upkeep: VectorIndexUpkeep,
    ) -> None:
        self._state = state
        self._follower = follower
        self._commits = commits
        self._usage = usage
        self._reads = reads
        self._upkeep = upkeep
        self._profiles = ProfileCache()
        self._text_index_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="toolweave-fts-build")

    def close(self) -> None:
        self._text_index_pool.shutdown(wait=False)  # idle: an ingest waits for its full-text index

    def ingest(
        self,
        source: str,
        tools: Sequence[ToolRecord],
        edges: Sequence[DependencyEdge] = (),
        *,
        replace_source: bool = True,
        progress: Progress | None = None,
    ) -> IngestSummary:
        """Add or update ``source``'s tools and declared edges; embed only tools whose content changed.

        Everything is checked before anything is written: a tool of another source, a duplicate id or
        an edge to an unknown tool raise, and the registry keeps what it held.
        """
        started = time.perf_counter()
        summary = IngestSummary(source=source)
        state = self._state
        with state.write_lock:
            self._check_batch(source, tools)
            if not self._would_change(source, tools, edges, replace_source) and self._follower.current():
                # an upstream re-listing what the registry holds (every replica's upstreams do): no
                # lock, no write
                ids = {t.id for t in tools}
                summary.unchanged = len(tools)
                summary.edges = sum(1 for e in state.edges if e.tool in ids)
                summary.seconds = time.perf_counter() - started
                return summary
            pending = [t for t in tools if state.snap.hashes.get(t.id) != t.content_hash]
            ahead = [tool_document(t, with_examples=not state.usage_on) for t in pending]
        # embedding is the long part of an ingest (minutes at 10k on a busy machine): done before the
        # fleet's writer lock, which is then held only to write and commit, so replicas' flushes wait
        # seconds, not the embedding. A tool another writer changed meanwhile is embedded under the lock.
        # Alone on every core, before inference: onnxruntime's threads work in lockstep, and our Python
        # beside them slowed the embedding by more than it saved (measured at 100k: bench/HISTORY.md).
        embedded = dict(zip(ahead, self._embed(ahead, progress), strict=True)) if ahead else {}
        # A large change is written in chunks of WRITE_CHUNK tools, each its own commit with the lock
        # released between them: another writer (a replica's flush) waits for one chunk's write at
        # most, not for the whole ingest's (73 s at 10k tools). The source's removals and declared
        # edges come with the last write, over every tool; a crash in between leaves the chunks
        # written, each a whole commit, and the next ingest of the source writes the rest.
        # The graph inference runs once, with the last write, over every tool the chunks wrote: the
        # same edges as one write makes.
        written: set[str] = set()
        for start in range(0, len(pending) if len(pending) > WRITE_CHUNK else 0, WRITE_CHUNK):
            chunk = pending[start : start + WRITE_CHUNK]
            if written:  # the lock stays free for a waiting writer's next look (file lock: no queue)
                time.sleep(2 * LOCK_POLL_MAX_S)
            part = self._write(source, chunk, (), False, embedded, infer=False)
            written.update(t.id for t in chunk)
            summary.added += part.added
            summary.updated += part.updated
            summary.embedded += part.embedded
        if written:
            time.sleep(2 * LOCK_POLL_MAX_S)
        last = self._write(source, tools, edges, replace_source, embedded, written=frozenset(written))
        summary.added += last.added
        summary.updated += last.updated
        summary.embedded += last.embedded
        summary.removed, summary.edges = last.removed, last.edges
        summary.unchanged = len(tools) - summary.added - summary.updated
        summary.seconds = time.perf_counter() - started
        log.info("ingested %s", summary)
        return summary

    def _write(
        self,
        source: str,
        tools: Sequence[ToolRecord],
        edges: Sequence[DependencyEdge],
        replace_source: bool,
        embedded: dict[str, np.ndarray],
        *,
        written: frozenset[str] = frozenset(),
        infer: bool = True,
    ) -> IngestSummary:
        """One write of ``ingest``: its inference prepared before the writer lock, then the rows, the
        graph and the commit under it. ``embedded``: document → vector, embedded before; ``written``:
        tools earlier chunks of this ingest wrote, inferred with this write's own (``infer``: False
        for those chunks)."""
        summary = IngestSummary(source=source)
        state = self._state
        infer = infer and state.settings.infer_dependencies
        # the graph inference too (most of what was left under the lock: 38 of 47 s at 10k tools)
        prepared = (
            self._prepare_inference(source, tools, edges, replace_source, embedded, written)
            if infer
            else None
        )
        with state.write_lock, self._commits.writer(rollback=False):
            snap = state.snap
            incoming = self._check_batch(source, tools)
            existing = {i for i, s in snap.sources.items() if s == source}
            removed = existing - incoming.keys() if replace_source else set()
            known = (set(snap.ids) - removed) | incoming.keys()
            self._check_edges(edges, known)
            # checks first: bad input raises before anything changes (no rollback needed)
            with self._commits.rollback_on_error():
                changed: list[ToolRecord] = []
                for tool in incoming.values():
                    old = snap.hashes.get(tool.id)
                    if old == tool.content_hash:
                        summary.unchanged += 1
                        continue
                    changed.append(tool)
                    if old is None:
                        summary.added += 1
                    else:
                        summary.updated += 1
                summary.removed = len(removed)

                documents = [tool_document(t, with_examples=not state.usage_on) for t in changed]
                late = [d for d in documents if d not in embedded]
                if late:
                    embedded.update(zip(late, self._embed(late, None), strict=True))
                vectors = [embedded[d] for d in documents]
                summary.embedded = len(changed)
                orphans = state.graph.inferred_dependents(removed | {t.id for t in changed} | written)
                # a source that declares edges gets none inferred: refresh all its tools so old ones go;
                # and a tool whose inferred producer leaves or changes may need its next-best one now
                focus = {t.id for t in changed} | (set(incoming) if edges else set()) | orphans | written
                universe = stored = inferred = None
                if prepared is not None and prepared.holds(snap, state.loaded_generation, focus):
                    # nobody wrote since: the graph this write makes was made before the lock
                    graph_changed, state.graph = prepared.graph_changed, prepared.graph
                else:  # no inference, or another writer committed meanwhile: made here
                    graph_changed = self._update_graph(
                        source, incoming.values(), removed, edges, tools_changed=bool(changed)
                    )
                    if prepared is not None and prepared.fits(snap, focus):
                        # what replicas' flushes change (examples, traffic, learned edges) is not what
                        # inference reads: its edges stand, merged into the graph as it is now
                        universe, inferred = prepared.universe, prepared.inferred
                    elif infer and (changed or removed or graph_changed or written):
                        # the registry as the write will leave it, read before the write: the inference
                        # below then reads neither the table nor the snapshot
                        universe = self._profiles.universe_after(snap.records, snap.hashes, changed, removed)
                        new_vectors = {t.id: v for t, v in zip(changed, vectors, strict=True)}
                        stored = self._reads.vectors().updated(new_vectors, removed)
                rows = [StoredTool(t, t.content_hash, v) for t, v in zip(changed, vectors, strict=True)]
                state.table.upsert(rows, documents)
                state.table.delete_ids(removed)
                if rows or removed:
                    state.changes.touch("tools", [source])
                self._usage.sync_examples(changed, removed)
                # LanceDB builds the full-text index on its own threads beside our inference; the new
                # snapshot waits for the index (its searches and their cache must not see a half-indexed
                # table), and so does a rollback (it restores table versions)
                text_index = state.table.rebuild_text_index
                indexing = self._text_index_pool.submit(text_index) if rows or removed else None
                try:
                    if universe is not None and inferred is not None:
                        self._infer(focus, universe, inferred=inferred)
                    elif universe is not None and stored is not None:
                        self._infer(focus, universe, propose_by_rules(universe, focus), stored)
                finally:
                    if indexing is not None:
                        wait([indexing])
                if indexing is not None:
                    indexing.result()
                    self._follower.reload({source})
                summary.edges = sum(len(state.graph.dependencies(tool_id)) for tool_id in incoming)
                if graph_changed or rows or removed or written:
                    self._commits.commit(f"ingest {source}", graph=True)
            if rows or removed:
                self._upkeep.refresh_later()
        return summary

    def _prepare_inference(
        self,
        source: str,
        tools: Sequence[ToolRecord],
        edges: Sequence[DependencyEdge],
        replace_source: bool,
        embedded: Mapping[str, np.ndarray],
        written: frozenset[str],
    ) -> _Prepared | None:
        """The graph the write will commit, made before the fleet's writer lock on a copy of the graph:
        the source's tools and declared edges, and the inference over the registry as the write will
        leave it (its profiles and vectors), as the write itself would make them. Under the process's
        own write lock (the profile cache is shared), not the fleet's. None when nothing is to infer, a
        tool is not embedded yet or an edge is bad; the write then makes its graph under the lock, as
        it does when another writer changed the registry meanwhile (``_Prepared.holds``)."""
        state = self._state
        with state.write_lock:
            snap = state.snap
            incoming = {t.id: t for t in tools}
            removed = {i for i, s in snap.sources.items() if s == source} - incoming.keys()
            if not replace_source:
                removed = set()
            changed = [t for t in incoming.values() if snap.hashes.get(t.id) != t.content_hash]
            documents = [tool_document(t, with_examples=not state.usage_on) for t in changed]
            # declared edges: the last write of a chunked ingest refreshes every tool of the source
            if not (changed or removed or edges or written) or any(d not in embedded for d in documents):
                return None
            try:
                self._check_edges(edges, (set(snap.ids) - removed) | incoming.keys())
            except GraphError:
                return None  # the write raises it, with nothing written
            orphans = state.graph.inferred_dependents(removed | {t.id for t in changed} | written)
            focus = {t.id for t in changed} | (set(incoming) if edges else set()) | orphans | written
            graph = copied(state.graph)
            graph_changed = self._update_graph(
                source, incoming.values(), removed, edges, tools_changed=bool(changed), graph=graph
            )
            if not (changed or removed or graph_changed or written):
                return None  # nothing for inference: the write's own graph step is cheap
            universe = self._profiles.universe_after(snap.records, snap.hashes, changed, removed)
            new_vectors = {t.id: embedded[d] for t, d in zip(changed, documents, strict=True)}
            stored = self._reads.vectors().updated(new_vectors, removed)
            inferred = infer_for(universe, stored, focus, by_rules=propose_by_rules(universe, focus))
            # the shared graph, whatever this gateway's manifest says (its view applies that)
            refresh_inferred_edges(graph, universe, None, focus, inferred=inferred)
            return _Prepared(
                snap, state.loaded_generation, frozenset(focus), graph, graph_changed, universe, inferred
            )

    def add_edges(self, edges: Sequence[DependencyEdge]) -> int:
        """Add edges between tools already in the registry; saves the graph.

        Declared and manifest edges beat inferred ones on the same pair; inferred edges never land
        where an authoritative edge or a manifest ``remove`` says otherwise.
        """
        state = self._state
        with state.write_lock:
            self._check_edges(edges, set(state.snap.ids))
        with state.write_lock, self._commits.writer():
            self._check_edges(edges, set(state.snap.ids))  # again: another process may have removed some
            inferred = [e for e in edges if e.origin == "inferred"]
            add_authoritative(state.graph, [e for e in edges if e.origin != "inferred"])
            merge_inferred(state.graph, inferred)  # the shared graph: a manifest is applied in views
            self._commits.commit("add edges", graph=True)
        return len(edges)

    def set_overrides(self, overrides: GraphOverrides) -> OverrideReport:
        """Install a manifest's graph corrections (add / remove / pin) in this gateway's view: they hold
        across later ingests and other replicas' commits, and are never committed (the registry is the
        fleet's, the manifest this gateway's: ``overrides.ManifestView``). No writer lock, no write."""
        state = self._state
        with state.write_lock:
            state.view = ManifestView(overrides)
            state.swap_in_graph(everything=True)
            return state.view.report(state.graph)

    def repair(self) -> None:
        """What an older version's crash could leave: no full-text index, or rows whose graph file was
        lost (migrated registries). Rebuilt from the rows and committed, never reported "unchanged"."""
        state = self._state
        repairs: list[str] = []
        if not self._needs_repair():
            state.db.graph_lost = False
            return
        with state.write_lock, self._commits.writer():
            count = len(state.snap.ids)
            if count and not state.table.has_text_index:
                state.table.rebuild_text_index()
                repairs.append("full-text index rebuilt")
            if state.db.graph_lost and state.settings.infer_dependencies:
                self._infer(set(state.snap.ids))
                repairs.append(f"dependencies re-inferred for {count} tools")
            state.db.graph_lost = False
            if repairs:
                log.warning("registry %s: %s", state.path, "; ".join(repairs))
                self._commits.commit("repair", graph=True, everything=True)

    def _needs_repair(self) -> bool:
        state = self._state
        no_index = bool(state.snap.ids) and not state.table.has_text_index
        return no_index or (state.db.graph_lost and state.settings.infer_dependencies)

    def _check_batch(self, source: str, tools: Sequence[ToolRecord]) -> dict[str, ToolRecord]:
        incoming: dict[str, ToolRecord] = {}
        owners = self._state.snap.sources
        for tool in tools:
            if tool.source != source:
                raise RegistryError(f"tool {tool.id!r} belongs to source {tool.source!r}, not {source!r}")
            if tool.id in incoming:
                raise RegistryError(f"source {source!r} lists tool id {tool.id!r} twice")
            owner = owners.get(tool.id)
            if owner is not None and owner != source:
                raise RegistryError(f"tool id {tool.id!r} of {source!r} is already taken by source {owner!r}")
            incoming[tool.id] = tool
        return incoming

    @staticmethod
    def _check_edges(edges: Sequence[DependencyEdge], known: set[str]) -> None:
        dangling = [e for e in edges if e.tool not in known or e.depends_on not in known]
        if dangling:
            listed = "; ".join(
                f"{e.tool} -> {e.depends_on} (unknown: {e.tool if e.tool not in known else e.depends_on})"
                for e in dangling[:5]
            )
            more = f" and {len(dangling) - 5} more" if len(dangling) > 5 else ""
            raise GraphError(
                f"{len(dangling)} dependency edge(s) name tools that do not exist: {listed}{more}"
            )

    def _would_change(
        self, source: str, tools: Sequence[ToolRecord], edges: Sequence[DependencyEdge], replace_source: bool
    ) -> bool:
        """Whether ingesting would change anything in this snapshot (the common re-listing does not)."""
        snap = self._state.snap
        ids = {t.id for t in tools}
        if any(snap.hashes.get(t.id) != t.content_hash for t in tools):
            return True
        if replace_source and any(s == source and i not in ids for i, s in snap.sources.items()):
            return True
        return set(edges) != {e for e in self._state.edges if e.origin == "declared" and e.tool in ids}

    def _embed(self, documents: list[str], progress: Progress | None) -> list[np.ndarray]:
        state = self._state
        return embed_chunked(state.embedder, documents, state.settings.embedding_batch_size, progress)

    def _update_graph(
        self,
        source: str,
        tools: Collection[ToolRecord],
        removed: set[str],
        edges: Sequence[DependencyEdge],
        *,
        tools_changed: bool,
        graph: DependencyGraph | None = None,
    ) -> bool:
        """Apply ``source``'s tools and declared edges to the graph; False when nothing changed.

        The common case is an upstream re-listing the same tools: then no tool changed and the source
        declares exactly the edges it already has, and the graph is left alone (comparing edge sets
        costs far less than serialising a 10k-tool graph to find out).
        """
        graph = self._state.graph if graph is None else graph
        ids = {t.id for t in tools}
        declared = {e for e in graph.edges(touching=ids) if e.origin == "declared" and e.tool in ids}
        if not tools_changed and not removed and set(edges) == declared:
            return False
        graph.remove_tools(removed)
        for tool in tools:
            graph.add_tool(tool.id, tool.kind, source)
        # A source's declared edges are replaced by what it declares now; manifest and inferred edges stay.
        graph.remove_edges(lambda e: e.origin == "declared" and e.tool in ids, touching=ids)
        problems = graph.add_edges(edges)
        if problems:  # _check_edges ran first, so this is a bug, not bad input
            raise GraphError(str(problems[0]))
        return True

    def _infer(
        self,
        changed_ids: set[str],
        universe: Sequence[ToolProfile] | None = None,
        by_rules: Sequence[DependencyEdge] | None = None,
        vectors: Mapping[str, np.ndarray] | None = None,
        *,
        inferred: Sequence[DependencyEdge] | None = None,
    ) -> None:
        """Refresh inferred edges from and to the changed tools (incremental).
        ``universe``, ``by_rules``, ``vectors``: what an ingest prepared beforehand (default: the
        snapshot's); ``inferred``: the edges themselves, inferred before the writer lock."""
        state = self._state
        if universe is None:
            universe = self._profiles.universe(state.snap.records, state.snap.hashes)
        if vectors is None and inferred is None:
            vectors = self._reads.vectors()
        # the shared graph, whatever this gateway's manifest says (its view applies that)
        refresh_inferred_edges(
            state.graph, universe, vectors, changed_ids, by_rules=by_rules, inferred=inferred
        )


@dataclass(frozen=True)
class _Prepared:
    """The graph a write will commit, made before the writer lock (``Ingest._prepare_inference``)."""

    snap: Snapshot
    generation: int
    focus: frozenset[str]
    graph: DependencyGraph
    graph_changed: bool
    universe: Sequence[ToolProfile]
    inferred: list[DependencyEdge]

    def holds(self, snap: Snapshot, generation: int, focus: set[str]) -> bool:
        """Whether it was inferred on the registry the write builds on (nobody wrote meanwhile)."""
        return snap is self.snap and generation == self.generation and focus == self.focus

    def fits(self, snap: Snapshot, focus: set[str]) -> bool:
        """Whether its inferred edges hold for ``snap``: others committed, but no tool changed (a
        replica's flush: examples, traffic, learned edges), so inference would find the same edges."""
        return focus == self.focus and snap.hashes == self.snap.hashes
