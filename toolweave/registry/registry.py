"""The registry: tools in a LanceDB table, their dependency graph beside it, and search over both.

A registry is one LanceDB database (``toolweave.registry.database``): the tool table, the edge and
override tables and the commit record naming the versions that belong together, so a crash never
leaves half an ingest. ``Registry`` is the one door to it: ingest (hash-based, incremental), look-ups and
the searches retrieval runs over it (``toolweave.retrieval.retrieve_tools``; the registry never imports
retrieval). Reads are served from in-memory snapshots (ids, vectors, records; dependency edges) that
are swapped whole after each write, so searches never see half an ingest and need no lock.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Collection, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import replace

import numpy as np

from toolweave.errors import (
    GraphError,
    ModelMismatchError,
    NotARegistryError,
    RegistryError,
    ToolNotFound,
    ToolweaveError,
)
from toolweave.names import NameVocabulary
from toolweave.records import (
    CONTEXT_WEIGHT,
    DependencyEdge,
    EdgeKind,
    Hit,
    QueryVariant,
    SearchResults,
    SearchScope,
    ToolRecord,
)
from toolweave.registry.database import RegistryDatabase, RegistryLocation, graph_from_rows
from toolweave.registry.documents import tool_document
from toolweave.registry.embeddings import Embedder, Progress, embed_chunked
from toolweave.registry.graph import DependencyGraph
from toolweave.registry.inference import ProfileCache, propose_by_rules, refresh_inferred_edges, walkable
from toolweave.registry.inference.producers import ToolProfile
from toolweave.registry.overrides import (
    GraphOverrides,
    OverrideReport,
    add_authoritative,
    apply_overrides,
    merge_inferred,
)
from toolweave.registry.snapshot import Snapshot, single_threaded_blas
from toolweave.registry.sources import SourceSpec
from toolweave.registry.store import CompactRecords, StoredTool
from toolweave.registry.summary import IngestSummary
from toolweave.registry.usage import (
    UsageExample,
    UsageTable,
    fuse_usage,
    merge_examples,
    now_ns,
    usage_vector,
)
from toolweave.registry.vector_index import (
    BUILD_BUDGET_S_PER_ROW,
    VectorIndexParams,
    ann_rank,
    index_state,
    refresh,
    row_map,
)
from toolweave.registry.vector_rows import VectorRows
from toolweave.settings import Settings
from toolweave.tracing import span

__all__ = ["IngestSummary", "Registry"]

log = logging.getLogger(__name__)

_COMPACT_EVERY = 50
LEASE_WAIT_S = 300.0
"""How long a write waits for another process's write (an ingest of 10k tools takes minutes)."""
USAGE_LEASE_WAIT_S = 2.0
"""A usage example is not worth a long wait: it is dropped (logged) when the lease stays busy."""


class Registry:
    """A tool registry (a local directory or an object-store URI). Open it with ``Registry.open(path)``."""

    def __init__(
        self, path: RegistryLocation, embedder: Embedder, settings: Settings, database: RegistryDatabase
    ) -> None:
        self.path = path
        self.embedder = embedder
        self.settings = settings
        self._db = database
        self._table = database.tool_table()
        self._usage: UsageTable = database.usage_table()
        self._usage_by_tool: dict[str, list[UsageExample]] = {}
        self._private: frozenset[str] = frozenset()
        self._write_lock = threading.RLock()
        self._writes = 0
        self._search_pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="toolweave-fts")
        self._index_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="toolweave-ann")
        self._text_index_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="toolweave-fts-build")
        self._index_queued = False
        self._remap_queued = False
        self._text_search_down = False  # logged once per outage of the store's full-text index
        self._graph = DependencyGraph()
        self._profiles = ProfileCache()
        self.overrides: GraphOverrides | None = None
        self._snap = Snapshot()
        self._deps: dict[str, tuple[DependencyEdge, ...]] = {}
        self._edges: tuple[DependencyEdge, ...] = ()
        self._sources: tuple[SourceSpec, ...] = ()
        self._loaded_generation = -1
        """The committed generation the snapshot shows (``refresh`` compares it with the stored one)."""
        self.foreign_loads = 0  # other processes' commits loaded, by refresh or by a write catching up
        single_threaded_blas()
        self._load_committed()
        self._repair()
        self._refresh_vector_index_later()

    # -- opening -------------------------------------------------------------------------------------
    @classmethod
    def open(
        cls,
        path: RegistryLocation | None = None,
        *,
        embedder: Embedder | None = None,
        settings: Settings | None = None,
    ) -> Registry:
        """Open the registry at ``path`` (default: ``settings.home``): a local directory, created if new,
        or an object-store URI (``s3://bucket/prefix``, with ``settings.registry_storage_options``).

        Opening finishes what a crash interrupted: writes no commit names are rolled back, a registry
        in the old ``graph.json`` layout is migrated, a missing full-text index is rebuilt.
        Raises ``NotARegistryError`` for a non-empty location that is not a registry, and
        ``ModelMismatchError`` when the registry was built with another embedding model.
        """
        settings = settings or Settings()
        location = path if path is not None else settings.home
        embedder = embedder or Embedder(settings.embedding_model)
        database = RegistryDatabase.open(
            location, settings.registry_storage_options, lease_s=settings.registry_lease_s
        )
        head = database.head
        if head is None:
            with database.lease.held(LEASE_WAIT_S):
                head = database.recover()  # another process may have created it meanwhile
                if head is None:
                    head = database.create(embedder.model_id, embedder.dim)
        if head.embedding_model != embedder.model_id:
            built = head.embedding_model
            raise ModelMismatchError(
                f"registry {location} was built with embedding model {built!r}, but {embedder.model_id!r} "
                f"is configured. Re-index it with `toolweave reindex --registry {location}` (re-embeds "
                f"every tool with the configured model), or configure {built!r}."
            )
        return cls(database.location, embedder, settings, database)

    @staticmethod
    def reindex(
        path: RegistryLocation,
        *,
        embedder: Embedder,
        settings: Settings | None = None,
        progress: Progress | None = None,
    ) -> int:
        """Re-embed every tool of the registry at ``path`` with ``embedder``; keeps tools, graph and
        usage examples (their queries re-embedded too).

        The new vectors go into new tables beside the old ones; the commit that names them is the
        swap. Until then the old registry is intact (and an interrupted reindex leaves it usable).
        """
        settings = settings or Settings()
        database = RegistryDatabase.open(
            path, settings.registry_storage_options, lease_s=settings.registry_lease_s
        )
        if database.head is None:
            raise NotARegistryError(f"{path} is not a toolweave registry (nothing was ever ingested there)")
        with database.lease.held(LEASE_WAIT_S):
            database.recover()
            return Registry._reindex(database, embedder, settings, progress)

    @staticmethod
    def _reindex(
        database: RegistryDatabase, embedder: Embedder, settings: Settings, progress: Progress | None
    ) -> int:
        old, old_usage = database.tool_table(), database.usage_table()
        rows = old.load_all()
        with_examples = settings.usage_weight <= 0
        documents = [tool_document(r.record, with_examples=with_examples) for r in rows]
        vectors = embed_chunked(embedder, documents, settings.embedding_batch_size, progress)
        new = database.new_tool_table(embedder.dim)
        new.upsert(
            [StoredTool(r.record, r.content_hash, v) for r, v in zip(rows, vectors, strict=True)], documents
        )
        new.rebuild_text_index()
        examples = [e for kept in old_usage.load_all().values() for e in kept]
        usage = database.new_usage_table(embedder.dim)
        if examples:
            queries = embed_chunked(
                embedder, [e.query for e in examples], settings.embedding_batch_size, None
            )
            usage.replace([], [replace(e, vector=v) for e, v in zip(examples, queries, strict=True)])
        database.commit(
            action="reindex", tools=new, usage=usage, embedding_model=embedder.model_id, dim=embedder.dim
        )
        # a crash before these leaves garbage the next open drops
        database.drop(old.name)
        database.drop(old_usage.name)
        return len(rows)

    def close(self) -> None:
        """Stop the search thread (every write is already committed); a vector index build under way
        finishes and commits first (an interrupted one would only be rolled back at the next open)."""
        self._search_pool.shutdown(wait=False)
        self._text_index_pool.shutdown(wait=False)  # idle: an ingest waits for its full-text index
        self._index_pool.shutdown(wait=True, cancel_futures=True)

    # -- look-ups ------------------------------------------------------------------------------------
    @property
    def graph(self) -> DependencyGraph:
        return self._graph

    @property
    def uses_vector_index(self) -> bool:
        """Whether vectors are searched through the ANN index (``Settings.vector_index_threshold``)."""
        return self._snap.ann

    def __len__(self) -> int:
        return len(self._snap.ids)

    def get(self, tool_id: str) -> ToolRecord:
        record = self._snap.records.get(tool_id)
        if record is None:
            raise ToolNotFound(f"no tool {tool_id!r} in registry {self.path}")
        return record

    def find(self, tool_id: str) -> ToolRecord | None:
        return self._snap.records.get(tool_id)

    def is_destructive(self, tool_id: str) -> bool:
        """Whether the tool says it may destroy data (``ToolRecord.destructive``; False for an unknown
        tool), without decoding a large registry's records that cannot be."""
        records = self._snap.records
        if isinstance(records, CompactRecords):
            return records.is_destructive(tool_id)
        record = records.get(tool_id)
        return record is not None and record.destructive

    def name_vocabulary(self) -> NameVocabulary:
        """How many tool names hold each term, as of the last completed write (retrieval's name match)."""
        return self._snap.names

    def source_of(self, tool_id: str) -> str | None:
        """The source ``tool_id`` came from (None for an unknown tool)."""
        return self._snap.sources.get(tool_id)

    def tools(self, source: str | None = None) -> list[ToolRecord]:
        snap = self._snap
        return [snap.records[i] for i in snap.ids if source is None or snap.sources[i] == source]

    def content_hashes(self) -> dict[str, str]:
        """Tool id → content hash, as of the last completed write or reload (never changed in place)."""
        return self._snap.hashes

    def sources(self) -> list[str]:
        return sorted(set(self._snap.sources.values()))

    def vectors(self) -> VectorRows:
        """Tool id → unit vector, for graph inference and diagnostics (read from the table when the
        registry is large enough to keep no matrix)."""
        snap = self._snap
        if snap.ann:
            return self._table.load_vectors()
        return VectorRows(snap.ids, snap.matrix)

    # -- writes --------------------------------------------------------------------------------------
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
        with self._write_lock:
            self._check_batch(source, tools)
            if not self._would_change(source, tools, edges, replace_source) and self._current():
                # an upstream re-listing what the registry holds (every replica's upstreams do): no
                # lease, no write
                ids = {t.id for t in tools}
                summary.unchanged = len(tools)
                summary.edges = sum(1 for e in self._edges if e.tool in ids)
                summary.seconds = time.perf_counter() - started
                return summary
        with self._write_lock, self._writer(rollback=False):
            snap = self._snap
            incoming = self._check_batch(source, tools)
            existing = {i for i, s in snap.sources.items() if s == source}
            removed = existing - incoming.keys() if replace_source else set()
            known = (set(snap.ids) - removed) | incoming.keys()
            self._check_edges(edges, known)
            # checks first: bad input raises before anything changes (no rollback needed)
            with self._rollback_on_error():
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

                documents = [tool_document(t, with_examples=not self._usage_on) for t in changed]
                # alone on every core: onnxruntime's threads work in lockstep, and our Python beside
                # them slowed the embedding by more than it saved (measured at 100k: bench/RESULTS.md)
                vectors = self._embed(documents, progress)
                summary.embedded = len(changed)
                orphans = self._graph.inferred_dependents(removed | {t.id for t in changed})
                graph_changed = self._update_graph(
                    source, incoming.values(), removed, edges, tools_changed=bool(changed)
                )
                # a source that declares edges gets none inferred: refresh all its tools so old ones go;
                # and a tool whose inferred producer leaves or changes may need its next-best one now
                focus = {t.id for t in changed} | (set(incoming) if edges else set()) | orphans
                universe = stored = None
                if self.settings.infer_dependencies and (changed or removed or graph_changed):
                    # the registry as the write will leave it, read before the write: the inference
                    # below then reads neither the table nor the snapshot
                    universe = self._profiles.universe_after(snap.records, snap.hashes, changed, removed)
                    new_vectors = {t.id: v for t, v in zip(changed, vectors, strict=True)}
                    stored = self.vectors().updated(new_vectors, removed)
                rows = [StoredTool(t, t.content_hash, v) for t, v in zip(changed, vectors, strict=True)]
                self._table.upsert(rows, documents)
                self._table.delete_ids(removed)
                self._sync_examples(changed, removed)
                # LanceDB builds the full-text index on its own threads beside our inference; the new
                # snapshot waits for the index (its searches and their cache must not see a half-indexed
                # table), and so does a rollback (it restores table versions)
                text_index = self._table.rebuild_text_index
                indexing = self._text_index_pool.submit(text_index) if rows or removed else None
                try:
                    if universe is not None and stored is not None:
                        self._infer(focus, universe, propose_by_rules(universe, focus), stored)
                finally:
                    if indexing is not None:
                        wait([indexing])
                if indexing is not None:
                    indexing.result()
                    self._reload()
                summary.edges = sum(len(self._graph.dependencies(tool_id)) for tool_id in incoming)
                if graph_changed or rows or removed:
                    self._commit(f"ingest {source}")
            if rows or removed:
                self._refresh_vector_index_later()
        summary.seconds = time.perf_counter() - started
        log.info("ingested %s", summary)
        return summary

    def delete_source(self, source: str) -> int:
        """Drop every tool of ``source`` (and its edges). Returns how many tools went."""
        return self.ingest(source, [], replace_source=True).removed

    # -- usage examples (Tool2Vec) ---------------------------------------------------------------------
    @property
    def _usage_on(self) -> bool:
        return self.settings.usage_weight > 0

    def usage_examples(self, tool_id: str) -> list[str]:
        """The example queries behind ``tool_id``'s usage vector, newest first."""
        return [e.query for e in self._usage_by_tool.get(tool_id, [])]

    def set_private(self, names: Collection[str]) -> None:
        """Tools (by id) or whole sources (by name) whose calls are never recorded as usage examples.

        Queries already recorded for them are forgotten; examples a manifest or catalog declares stay.
        """
        with self._write_lock:
            self._private = frozenset(names)
            if not self._private_calls():
                return
            with self._writer():
                purged = self._private_calls()
                if purged:
                    self._write_usage(purged)
                    self._commit_usage()

    def _private_calls(self) -> dict[str, list[UsageExample]]:
        """Tool id → its examples without recorded calls, for private tools that have recorded calls."""
        return {
            tool_id: [e for e in examples if e.origin != "call"]
            for tool_id, examples in self._usage_by_tool.items()
            if self._is_private(tool_id) and any(e.origin == "call" for e in examples)
        }

    def record_usage(self, tool_id: str, query: str) -> bool:
        """Keep ``query`` (the request that led to a successful call of ``tool_id``) as a usage example.

        Returns False, storing nothing, when usage vectors are off, the tool is unknown or private, or
        ``query`` is already its newest example. The query's vector usually comes from the embedder's
        cache (the same text was just retrieved with).
        """
        query = query.strip()
        if not query or not self._usage_on or tool_id not in self._snap.records or self._is_private(tool_id):
            return False
        current = self._usage_by_tool.get(tool_id, [])
        if current and current[0].query == query:
            return False
        try:
            vector = self.embedder.embed_query(query)
            with self._write_lock, self._writer(USAGE_LEASE_WAIT_S):
                new = UsageExample(tool_id, query, "call", now_ns(), vector)
                merged = merge_examples(self._usage_by_tool.get(tool_id, []), [new], self.settings.usage_cap)
                self._write_usage({tool_id: merged})
                self._commit_usage()
        except ToolweaveError:  # a lost example must never fail the call that taught it
            log.warning("could not keep a usage example for %s", tool_id, exc_info=True)
            return False
        return True

    def _is_private(self, tool_id: str) -> bool:
        source = self._snap.sources.get(tool_id)
        return tool_id in self._private or (source is not None and source in self._private)

    def _sync_examples(self, changed: Sequence[ToolRecord], removed: Collection[str]) -> None:
        """Declared examples of changed tools replace their old declared ones (recorded calls stay);
        removed tools lose every example. Texts already stored keep their vectors (no re-embedding)."""
        by_tool = self._usage_by_tool
        stale = [
            t
            for t in changed
            if [e.query for e in by_tool.get(t.id, []) if e.origin == "example"]
            != list(t.examples[: self.settings.usage_cap])
        ]
        gone = [i for i in removed if i in by_tool]
        if not stale and not gone:
            return
        known = {e.query: e.vector for examples in by_tool.values() for e in examples}
        missing = list(dict.fromkeys(q for t in stale for q in t.examples if q not in known))
        if missing:
            known.update(zip(missing, self.embedder.embed_documents(missing), strict=True))
        at = now_ns()
        updates: dict[str, list[UsageExample]] = {i: [] for i in gone}
        for tool in stale:
            # declared order is kept: the first example counts as the newest
            declared = [
                UsageExample(tool.id, q, "example", at - n, known[q])
                for n, q in enumerate(tool.examples[: self.settings.usage_cap])
            ]
            calls = [e for e in by_tool.get(tool.id, []) if e.origin == "call"]
            updates[tool.id] = merge_examples(calls, declared, self.settings.usage_cap)
        self._write_usage(updates, publish=False)  # the caller reloads the snapshot

    def _write_usage(self, updates: dict[str, list[UsageExample]], *, publish: bool = True) -> None:
        self._usage.replace(list(updates), [e for examples in updates.values() for e in examples])
        for tool_id, examples in updates.items():
            if examples:
                self._usage_by_tool[tool_id] = examples
            else:
                self._usage_by_tool.pop(tool_id, None)
        if publish:
            rows, matrix = self._usage_snapshot(self._snap.ids)
            self._snap = replace(self._snap, usage_rows=rows, usage_matrix=matrix)

    def _usage_snapshot(self, ids: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """(rows of ``ids`` that have usage examples, their usage vectors)."""
        rows = [n for n, tool_id in enumerate(ids) if self._usage_by_tool.get(tool_id)]
        matrix = (
            np.stack([usage_vector(self._usage_by_tool[ids[n]]) for n in rows])
            if rows
            else np.zeros((0, 1), dtype=np.float32)
        )
        return np.asarray(rows, dtype=np.int64), matrix

    def _compact_now_and_then(self) -> None:
        """Every LanceDB write leaves a table version; merge them now and then (a long-running
        gateway re-ingests whenever an upstream changes). A failed compaction costs only disk.
        Compaction makes new table versions (same rows), so it runs before a commit names them."""
        self._writes += 1
        if self._writes % _COMPACT_EVERY:
            return
        for table in (self._table, self._usage):
            try:
                table.compact()
            except RegistryError:
                log.warning("compacting %s failed; will try again later", table.name, exc_info=True)
        self._db.compact()

    @contextmanager
    def _rollback_on_error(self) -> Iterator[None]:
        """A write that fails half-way (bad input found late, a store error, Ctrl-C) leaves the last
        committed state, on disk and in memory: nothing is half-written for the next reader."""
        try:
            yield
        except BaseException:
            try:
                self._db.roll_back()
                self._load_committed()
            except RegistryError:
                log.exception(
                    "registry %s: rolling back a failed write failed; the next open retries", self.path
                )
            raise

    def _check_batch(self, source: str, tools: Sequence[ToolRecord]) -> dict[str, ToolRecord]:
        incoming: dict[str, ToolRecord] = {}
        for tool in tools:
            if tool.source != source:
                raise RegistryError(f"tool {tool.id!r} belongs to source {tool.source!r}, not {source!r}")
            if tool.id in incoming:
                raise RegistryError(f"source {source!r} lists tool id {tool.id!r} twice")
            owner = self._snap.sources.get(tool.id)
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

    def _embed(self, documents: list[str], progress: Progress | None) -> list[np.ndarray]:
        return embed_chunked(self.embedder, documents, self.settings.embedding_batch_size, progress)

    def _update_graph(
        self,
        source: str,
        tools: Collection[ToolRecord],
        removed: set[str],
        edges: Sequence[DependencyEdge],
        *,
        tools_changed: bool,
    ) -> bool:
        """Apply ``source``'s tools and declared edges to the graph; False when nothing changed.

        The common case is an upstream re-listing the same tools: then no tool changed and the source
        declares exactly the edges it already has, and the graph is left alone (comparing edge sets
        costs far less than serialising a 10k-tool graph to find out).
        """
        graph = self._graph
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
    ) -> None:
        """Refresh inferred edges from and to the changed tools (incremental), then re-apply overrides.
        ``universe``, ``by_rules``, ``vectors``: what an ingest prepared beforehand (default: the
        snapshot's)."""
        if universe is None:
            universe = self._profiles.universe(self._snap.records, self._snap.hashes)
        if vectors is None:
            vectors = self.vectors()
        refresh_inferred_edges(
            self._graph, universe, vectors, changed_ids, overrides=self.overrides, by_rules=by_rules
        )
        if self.overrides is not None:
            apply_overrides(self._graph, self.overrides)

    def add_edges(self, edges: Sequence[DependencyEdge]) -> int:
        """Add edges between tools already in the registry; saves the graph.

        Declared and manifest edges beat inferred ones on the same pair; inferred edges never land
        where an authoritative edge or a manifest ``remove`` says otherwise.
        """
        with self._write_lock:
            self._check_edges(edges, set(self._snap.ids))
        with self._write_lock, self._writer():
            self._check_edges(edges, set(self._snap.ids))  # again: another process may have removed some
            inferred = [e for e in edges if e.origin == "inferred"]
            add_authoritative(self._graph, [e for e in edges if e.origin != "inferred"])
            merge_inferred(self._graph, inferred, self.overrides)
            self._commit("add edges")
        return len(edges)

    def set_overrides(self, overrides: GraphOverrides) -> OverrideReport:
        """Install a manifest's graph corrections (add / remove / pin); they hold across later ingests."""
        with self._write_lock, self._writer():
            self.overrides = overrides
            report = apply_overrides(self._graph, overrides)
            self._db.save_overrides(overrides)
            self._commit("set overrides")
        return report

    def _commit(self, action: str) -> None:
        """Write the edges, then the commit record that makes this write the registry (the last step:
        see ``toolweave.registry.database``), then publish what readers see of the graph."""
        self._db.save_edges(self._graph.edges())
        self._compact_now_and_then()
        self._db.commit(action=action, tools=self._table, usage=self._usage)
        self._loaded_generation = self._db.committed_generation()
        self._publish_graph()

    def _commit_usage(self) -> None:
        """Commit usage examples alone (the edges did not change: no need to rewrite them)."""
        self._compact_now_and_then()
        self._db.commit(action="usage", tools=self._table, usage=self._usage)
        self._loaded_generation = self._db.committed_generation()

    @property
    def loaded_generation(self) -> int:  # every write or reload changes it; an unchanged re-list does not
        return self._loaded_generation

    def generation(self) -> int:
        """The registry's committed generation as stored now: another process's commit raises it."""
        return self._db.generation()

    def _publish_graph(self) -> None:
        # Searches run on other threads while an ingest changes the networkx graph: they read this
        # immutable copy, swapped whole, never the graph being changed.
        graph = self._graph
        # retrieval walks only edges it may trust: weak inferred ones stay in the graph, unwalked
        floor = self.settings.infer_min_confidence
        changed = graph.take_changed()
        if changed is None:  # a graph just built (open, rollback, another process's commit)
            deps = {tool: tuple(walkable(graph.dependencies(tool), floor)) for tool in graph.nx_graph.nodes}
        else:  # the tools this write changed: at 100k tools, redoing every one was a tenth of an ingest
            deps = dict(self._deps)
            for tool in changed:
                if tool in graph:
                    deps[tool] = tuple(walkable(graph.dependencies(tool), floor))
                else:
                    deps.pop(tool, None)
        self._deps = deps
        self._edges = tuple(graph.edges())

    def edges(self) -> tuple[DependencyEdge, ...]:
        """Every dependency edge, as of the last completed write (safe from any thread)."""
        return self._edges

    def dependencies(self, tool_id: str, kinds: Sequence[EdgeKind] | None = None) -> list[DependencyEdge]:
        """What ``tool_id`` needs, as of the last completed write (safe from any thread); inferred edges
        below ``Settings.infer_min_confidence`` are left out (the retrieval walk must not follow them)."""
        return [e for e in self._deps.get(tool_id, ()) if kinds is None or e.kind in kinds]

    def _load_committed(self) -> None:
        """Snapshot, graph and overrides from the committed tables (at open and after a rollback)."""
        self._table = self._db.tool_table()
        self._usage = self._db.usage_table()
        self._usage_by_tool = self._usage.load_all()
        self.overrides = self._db.load_overrides()
        self._sources = tuple(SourceSpec(**row) for row in self._db.load_sources())
        self._loaded_generation = self._db.committed_generation()
        self._reload()
        self._graph = graph_from_rows(self._snap.nodes(), self._db.load_edges())
        self._publish_graph()

    def _repair(self) -> None:
        """What an older version's crash could leave: no full-text index, or rows whose graph file was
        lost (migrated registries). Rebuilt from the rows and committed, never reported "unchanged"."""
        repairs: list[str] = []
        if not self._needs_repair():
            self._db.graph_lost = False
            return
        with self._write_lock, self._writer():
            if len(self) and not self._table.has_text_index:
                self._table.rebuild_text_index()
                repairs.append("full-text index rebuilt")
            if self._db.graph_lost and self.settings.infer_dependencies:
                self._infer(set(self._snap.ids))
                repairs.append(f"dependencies re-inferred for {len(self)} tools")
            self._db.graph_lost = False
            if repairs:
                log.warning("registry %s: %s", self.path, "; ".join(repairs))
                self._commit("repair")

    def _needs_repair(self) -> bool:
        no_index = bool(len(self)) and not self._table.has_text_index
        return no_index or (self._db.graph_lost and self.settings.infer_dependencies)

    # -- many processes on one registry (docs/registry.md, "Replicas") --------------------------------
    @contextmanager
    def _writer(self, wait_s: float = LEASE_WAIT_S, *, rollback: bool = True) -> Iterator[None]:
        """A write: hold the writer lease (another process's write finishes first), catch up with what
        other processes committed, and (``rollback``) roll back on error. Call it with ``_write_lock``
        held. ``ingest`` checks its input first and rolls back only what follows."""
        with self._db.lease.held(wait_s):
            self._catch_up()
            if not rollback:
                yield
                return
            with self._rollback_on_error():
                yield

    def _catch_up(self) -> None:
        """Under the lease: roll back what a dead writer left uncommitted, and load what others
        committed since this snapshot, so this write builds on the newest registry."""
        head = self._db.recover()
        if head is None:
            raise RegistryError(f"registry {self.path} lost its commit record")
        if head.generation != self._loaded_generation:
            self._load_committed()
            self.foreign_loads += 1
        else:  # same state: handles opened at an older committed version may be read-only
            self._table.writable()
            self._usage.writable()

    def _current(self) -> bool:
        """Whether the snapshot shows the newest committed generation (one small read)."""
        return self._db.generation() == self._loaded_generation

    def _would_change(
        self, source: str, tools: Sequence[ToolRecord], edges: Sequence[DependencyEdge], replace_source: bool
    ) -> bool:
        """Whether ingesting would change anything in this snapshot (the common re-listing does not)."""
        snap = self._snap
        ids = {t.id for t in tools}
        if any(snap.hashes.get(t.id) != t.content_hash for t in tools):
            return True
        if replace_source and any(s == source and i not in ids for i, s in snap.sources.items()):
            return True
        return set(edges) != {e for e in self._edges if e.origin == "declared" and e.tool in ids}

    def refresh(self) -> bool:
        """Load the newest committed generation when another process committed one (a follower polls
        this); False, after reading one small row, when nothing changed."""
        if self._current():
            return False
        with self._write_lock:
            head = self._db.reread_head()
            if head.generation == self._loaded_generation:
                return False
            if head.embedding_model != self.embedder.model_id:
                log.error(
                    "registry %s was re-indexed with %s by another process; restart with that model",
                    self.path,
                    head.embedding_model,
                )
                return False
            self._load_committed()
            self.foreign_loads += 1
        log.info("registry %s: loaded generation %d (%s)", self.path, head.generation, head.action)
        return True

    def source_specs(self) -> tuple[SourceSpec, ...]:
        """The committed connection specs of sources (as some replica's manifest wrote them)."""
        return self._sources

    def set_source_specs(self, specs: Sequence[SourceSpec]) -> None:
        """Record ``specs`` (replacing those of the same names; others stay): replicas whose manifests
        lack a source learn from them how to reach it. Writes only when something changed."""
        with self._write_lock:
            if not self._sources_change(specs):
                return
            with self._writer():
                if not self._sources_change(specs):
                    return
                merged = {s.name: s for s in self._sources} | {s.name: s for s in specs}
                self._db.save_sources([vars(s) for s in sorted(merged.values(), key=lambda s: s.name)])
                self._compact_now_and_then()
                self._db.commit(action="sources", tools=self._table, usage=self._usage)
                self._sources = tuple(SourceSpec(**row) for row in self._db.load_sources())
                self._loaded_generation = self._db.committed_generation()

    def _sources_change(self, specs: Sequence[SourceSpec]) -> bool:
        have = {s.name: s for s in self._sources}
        return any(have.get(s.name) != s for s in specs)

    def _reload(self) -> None:
        ann = self._table.count() >= self.settings.vector_index_threshold
        records: Mapping[str, ToolRecord]
        if ann:  # neither vectors nor decoded records in memory: see docs/registry.md "Large registries"
            id_list, source_list, hash_list, name_list, records = self._table.load_compact()
            matrix = np.zeros((0, 1), np.float32)
        else:
            rows = self._table.load_all()
            id_list = [r.record.id for r in rows]
            source_list = [r.record.source for r in rows]
            hash_list = [r.content_hash for r in rows]
            name_list = [r.record.name for r in rows]
            records = {r.record.id: r.record for r in rows}
            matrix = np.stack([r.vector for r in rows]) if rows else np.zeros((0, 1), np.float32)
        ids = tuple(id_list)
        names = tuple(sorted(set(source_list)))
        code = {name: n for n, name in enumerate(names)}
        usage_rows, usage_matrix = self._usage_snapshot(ids)
        last = self._snap
        self._snap = Snapshot(
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
            ann_refine=ann and not index_state(self._table).exact,
            names=last.names.following(last.ids, ids, dict(zip(ids, name_list, strict=True))),
        )  # ``rows``: read by the first search (in the background), not on the ingest's or open's path
        for tool_id, kind, source in self._snap.nodes():  # graph nodes follow the rows (rebuilt at open)
            if tool_id not in self._graph:
                self._graph.add_tool(tool_id, kind, source)

    # -- search --------------------------------------------------------------------------------------
    def _rank(self, query_vector: np.ndarray, k: int, exclude_sources: Collection[str]) -> list[Hit]:
        snap = self._snap
        if not snap.ids or k <= 0:
            return []
        if snap.ann:
            return self._ann_rank(snap, query_vector, k, exclude_sources)
        scores = snap.matrix @ query_vector
        if snap.usage_rows.size and self._usage_on:
            # Tool2Vec: tools with usage examples also score by how close the query is to them
            fuse_usage(scores, snap.usage_rows, snap.usage_matrix @ query_vector, self.settings.usage_weight)
        if exclude_sources:
            excluded = [n for n, name in enumerate(snap.source_names) if name in exclude_sources]
            scores = np.where(np.isin(snap.source_codes, excluded), -np.inf, scores)
        k = min(k, len(snap.ids))
        top = np.argpartition(-scores, k - 1)[:k]
        top = top[np.argsort(-scores[top], kind="stable")]
        return [Hit(snap.ids[i], float(scores[i])) for i in top if np.isfinite(scores[i])]

    def _ann_rank(
        self, snap: Snapshot, query_vector: np.ndarray, k: int, exclude_sources: Collection[str]
    ) -> list[Hit]:
        usage_weight = self.settings.usage_weight if self._usage_on else 0.0
        rows = snap.rows
        if rows is None or rows.version != self._table.version:
            rows = None  # none yet, or a write moved the table on: ids read from the table meanwhile
            self._remap_rows_later()
        return ann_rank(
            self._table, snap, rows, query_vector, k, exclude_sources, self._index_params, usage_weight
        )

    @property
    def _index_params(self) -> VectorIndexParams:
        settings = self.settings
        return VectorIndexParams(
            settings.vector_index_ef, settings.vector_index_refine, settings.vector_index_kind
        )

    def refresh_vector_index(self) -> str:
        """Bring a large registry's ANN index up to date with its rows now, and commit it: ``built``,
        ``merged`` (new rows added to it), ``current`` or ``none`` (below the size threshold). Ingests
        schedule this on a background thread; searches meanwhile search the rows the index lacks flat."""
        with self._write_lock:
            self._index_queued = False
            if not self._snap.ann:
                return "none"
            with self._writer():  # the lease: another replica may be writing this registry
                self._db.lease.extend(len(self) * BUILD_BUDGET_S_PER_ROW)
                done = refresh(self._table, self.settings.vector_index_kind)
                if done != "current":
                    self._db.commit(action=f"vector index {done}", tools=self._table, usage=self._usage)
                    self._loaded_generation = self._db.committed_generation()
                    refined = not index_state(self._table).exact
                    self._snap = replace(self._snap, ann_refine=refined, rows=row_map(self._table))
            log.info("registry %s: vector index %s (%d tools)", self.path, done, len(self))
            return done

    def _refresh_vector_index_later(self) -> None:
        if not self._snap.ann or self._index_queued:
            return
        self._index_queued = True
        try:
            self._index_pool.submit(self._refresh_vector_index_logged)
        except RuntimeError:  # closed: the next open refreshes it
            self._index_queued = False

    def _remap_rows_later(self) -> None:
        """Read the row addresses on the background thread, after the write under way: after a reload
        (at open, after an ingest) and after a write that moved the table (a compaction)."""
        if self._remap_queued:
            return
        self._remap_queued = True
        try:
            self._index_pool.submit(self._remap_rows)
        except RuntimeError:  # closed
            self._remap_queued = False

    def _remap_rows(self) -> None:
        with self._write_lock:
            self._remap_queued = False
            snap = self._snap
            if snap.ann and (snap.rows is None or snap.rows.version != self._table.version):
                try:
                    self._snap = replace(snap, rows=row_map(self._table))
                except ToolweaveError:  # searches read ids from the table meanwhile: slower, complete
                    log.warning("registry %s: reading the row addresses failed", self.path, exc_info=True)

    def _refresh_vector_index_logged(self) -> None:
        try:
            self.refresh_vector_index()
        except ToolweaveError:
            # rolled back already; searches stay complete (rows no index covers are searched flat)
            log.warning("registry %s: refreshing the vector index failed", self.path, exc_info=True)

    def text_hits(self, query: str, k: int, exclude_sources: Collection[str] = ()) -> list[Hit]:
        """BM25 over tool documents through LanceDB's full-text index."""
        if k <= 0:
            return []
        snap = self._snap  # answers cached on the snapshot: its swap after a write invalidates them
        sources = snap.sources
        extra = k * 2 if exclude_sources else 0
        key = (query, k + extra)
        hits = snap.text_hits.get(key)
        if hits is None:
            try:
                hits = self._table.text_search(query, k + extra)
            except RegistryError as exc:
                # The index lives in the store (an object store may be down): the vector half, held in
                # memory, still answers. Not cached, so the first search after the outage uses BM25 again.
                if not self._text_search_down:
                    self._text_search_down = True
                    log.warning(
                        "registry %s: full-text search failed, vector search only: %s", self.path, exc
                    )
                return []
            if self._text_search_down:
                self._text_search_down = False
                log.warning("registry %s: full-text search works again", self.path)
            snap.text_hits.put(key, hits)
        return [Hit(i, s) for i, s in hits if i in sources and sources[i] not in exclude_sources][:k]

    def search(
        self, queries: Sequence[QueryVariant], k: int, scope: SearchScope | None = None
    ) -> SearchResults:
        """Vector and full-text hits for each query variant within ``scope`` (see ``SearchIndex.search``),
        computed at once.

        The full-text searches run on worker threads while this one embeds every distinct text in one
        model run (both release the GIL). A variant with context texts gets the composed vector
        ``v(query) + w * v(previous) + w**2 * v(the one before) ...``: those vectors are usually in the
        embedder's cache, so conversation context costs no second model run over a long text.
        """
        scope = scope or SearchScope()
        with span("search", variants=len(queries), k=k, vector=scope.vector, text=scope.text):
            return self._search(queries, k, scope)

    def _search(self, queries: Sequence[QueryVariant], k: int, scope: SearchScope) -> SearchResults:
        exclude_sources = scope.exclude_sources
        pending = (
            [self._search_pool.submit(self.text_hits, q[0], k, exclude_sources) for q in queries]
            if scope.text
            else []
        )
        ranked: list[list[Hit]] = [[] for _ in queries]
        if scope.vector:
            parts = list(dict.fromkeys(p for q in queries for p in q))
            embedded = dict(zip(parts, self.embedder.embed_queries(parts), strict=True))
            for n, variant in enumerate(queries):
                composed = (
                    embedded[variant[0]]
                    + sum(  # older context weighs less (decay)
                        (CONTEXT_WEIGHT**n * embedded[p] for n, p in enumerate(variant[1:], 1)),
                        np.zeros_like(embedded[variant[0]]),
                    )
                )
                ranked[n] = self._rank(composed / (np.linalg.norm(composed) or 1.0), k, exclude_sources)
        texts = [f.result() for f in pending] if scope.text else [[] for _ in queries]
        return list(zip(ranked, texts, strict=True))

    def dependents(self, tool_id: str, kinds: Sequence[EdgeKind] | None = None) -> list[str]:
        """Tools that consume what ``tool_id`` produces, through walkable edges, as of the last write."""
        edges = walkable(self._edges, self.settings.infer_min_confidence)
        return [e.tool for e in edges if e.depends_on == tool_id and (kinds is None or e.kind in kinds)]
