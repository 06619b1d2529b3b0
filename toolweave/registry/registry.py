"""The registry: tools in a LanceDB table, their dependency graph beside it, and search over both.

A registry is one LanceDB database (``toolweave.registry.database``): the tool table, the edge, usage,
override and source tables and the commit record naming the versions that belong together, so a crash
never leaves half a write. ``Registry`` is the one door to it, a façade over parts with one job each,
sharing one ``RegistryState`` (handles and the in-memory read model):

========================  ==========================================================================
part                      job
========================  ==========================================================================
``search.SnapshotSearch``  look-ups, the walkable edges, vector and full-text search over the snapshot
``ingest.Ingest``          the writer path: check, embed, graph update, inference, commit, repair
``usage_book.UsageBook``   Tool2Vec usage examples; a call is buffered (``observations``), not written
``learned.LearnedEdgeBook`` value flow seen between calls (buffered too) and the learned edges it makes
``flusher.Flusher``        writes buffered observations in batches: one write, one commit per flush
``follower.Follower``      loads committed generations (open, rollback, catch-up, ``refresh``)
``commits.Commits``        the writer lock, catching up, rollback on error, the commit record
``vector_upkeep``          a large registry's ANN index, refreshed on a background thread
``sources.SourceBook``     the source specs replicas share
``fleet_map.FleetMapBook`` the fleet's request map, refit offline from recorded calls
========================  ==========================================================================

Reads are served from the snapshot, swapped whole after each write, so searches never see half an
ingest and need no lock. ``toolweave.retrieval.retrieve_tools`` ranks over it (the registry never
imports retrieval). The quarantine (``quarantine.py``) keeps its own table in the same database.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Sequence

from toolweave.errors import ModelMismatchError, NotARegistryError
from toolweave.registry.commits import LOCK_WAIT_S, Commits
from toolweave.registry.database import RegistryDatabase, RegistryLocation
from toolweave.registry.embeddings import Embedder, Progress
from toolweave.registry.evidence import Sighting
from toolweave.registry.fleet_map import KIND as FLEET_MAP_KIND
from toolweave.registry.fleet_map import FleetMapBook, RefitSchedule
from toolweave.registry.flusher import Flusher
from toolweave.registry.follower import Follower
from toolweave.registry.graph import DependencyGraph
from toolweave.registry.ingest import Ingest
from toolweave.registry.learned import LearnedEdgeBook
from toolweave.registry.models import same_vectors, shipped
from toolweave.registry.observations import Observations, Sink
from toolweave.registry.overrides import GraphOverrides, OverrideReport
from toolweave.registry.reindex import reindex_database
from toolweave.registry.search import SnapshotSearch
from toolweave.registry.snapshot import single_threaded_blas
from toolweave.registry.sources import SourceBook
from toolweave.registry.state import RegistryState
from toolweave.registry.summary import IngestSummary
from toolweave.registry.usage_book import UsageBook
from toolweave.registry.vector_upkeep import VectorIndexUpkeep
from toolweave.settings import Settings

__all__ = ["IngestSummary", "Registry"]

log = logging.getLogger(__name__)


class Registry:
    """A tool registry (a local directory or an object-store URI). Open it with ``Registry.open(path)``.

    Most of its methods are its parts' own, bound at construction (see the module docstring): their
    documentation is there.
    """

    def __init__(
        self, path: RegistryLocation, embedder: Embedder, settings: Settings, database: RegistryDatabase
    ) -> None:
        self.path = path
        self._state = state = RegistryState(path, embedder, settings, database)
        observations = Observations()
        self._usage = UsageBook(state, observations)
        self._learned = LearnedEdgeBook(state, observations, self._usage.is_private)
        self._follower = Follower(state, self._usage, self._learned)
        self._commits = Commits(state, self._follower)
        self.vector_index = VectorIndexUpkeep(state, self._commits)
        """A large registry's ANN index: ``in_use``, ``refresh()`` (also run after ingests)."""
        self._reads = reads = SnapshotSearch(state, self.vector_index)
        self._ingest = Ingest(state, self._follower, self._commits, self._usage, reads, self.vector_index)
        sinks: list[Sink] = [self._usage, self._learned]
        self._flusher = Flusher(state, self._commits, observations, sinks, settings.usage_flush_s)
        self._sources = SourceBook(state, self._commits)
        self.fleet_map = FleetMapBook(state, self._commits, self._usage, reads.vectors)
        """The fleet's own request map: ``refit()``, ``reset()``, ``current()`` (fleet_map.py)."""
        self._follower.appliers[FLEET_MAP_KIND] = self.fleet_map.load
        self._follower.whole.append(self.fleet_map.load)
        self._refits = RefitSchedule(self.fleet_map, settings.fleet_map_refit_s)

        # Reads, as of the last completed write, safe from any thread (search.py).
        self.find = reads.find
        self.get = reads.get
        self.tools = reads.tools
        self.sources = reads.sources
        self.source_of = reads.source_of
        self.loosely_named = reads.loosely_named
        self.content_hashes = reads.content_hashes
        self.is_destructive = reads.is_destructive
        self.name_vocabulary = reads.name_vocabulary
        self.calibration = reads.calibration
        self.vectors = reads.vectors
        self.edges = reads.edges
        self.dependencies = reads.dependencies
        self.dependents = reads.dependents
        self.search = reads.search
        self.text_hits = reads.text_hits
        self.next_steps = self._learned.next_steps
        self.usage_vectors = self._usage.snapshot_rows
        self.is_private = self._usage.is_private
        # Writes of tools and edges (ingest.py), each committed before it returns.
        self.ingest = self._ingest.ingest
        self.add_edges = self._ingest.add_edges
        # Other processes' commits (follower.py): a gateway polls ``refresh``.
        self.refresh = self._follower.refresh
        # Source specs every replica reads (sources.py).
        self.source_specs = self._sources.specs
        self.set_source_specs = self._sources.record

        single_threaded_blas()
        self._follower.load_committed()
        self._ingest.repair()
        self.vector_index.refresh_later()
        self._refits.start()

    def set_overrides(self, overrides: GraphOverrides) -> OverrideReport:
        """This gateway's manifest corrections of the graph, in its own reads alone (``Ingest``)."""
        report = self._ingest.set_overrides(overrides)
        with self._state.write_lock:
            self._learned.view_changed()
        return report

    # -- opening and closing -------------------------------------------------------------------------
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
        ``ModelMismatchError`` when the registry was built with another embedding model. When nobody
        chose one (no ``embedder``, ``embedding_model`` not set), a registry built with a model the
        package ships opens with that model: a new default never locks users out of their registry.
        """
        settings = settings or Settings()
        location = path if path is not None else settings.home
        chosen = embedder is not None or "embedding_model" in settings.model_fields_set
        embedder = embedder or Embedder(settings.embedding_model)
        database = _open_database(location, settings)
        head = database.head
        if head is None:
            with database.lock.held(LOCK_WAIT_S):
                head = database.recover()  # another process may have created it meanwhile
                if head is None:
                    head = database.create(embedder.model_id, embedder.dim)
        built = head.embedding_model
        if not same_vectors(built, embedder.model_id) and not chosen and shipped(built):
            # nobody chose a model: a registry built with an earlier default keeps serving with it
            log.info(
                "registry %s was built with %s: serving with it (`toolweave reindex` moves it to the "
                "default, %s)",
                location,
                built,
                embedder.model_id,
            )
            embedder = Embedder(built)
        if not same_vectors(built, embedder.model_id):
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
        usage examples (their queries re-embedded too). See ``toolweave.registry.reindex``."""
        settings = settings or Settings()
        database = _open_database(path, settings)
        if database.head is None:
            raise NotARegistryError(f"{path} is not a toolweave registry (nothing was ever ingested there)")
        with database.lock.held(LOCK_WAIT_S):
            database.recover()
            return reindex_database(database, embedder, settings, progress)

    def close(self) -> None:
        """Write the buffered observations (one commit), then stop the worker threads; a vector index
        build under way finishes and commits first. Every other write is committed already."""
        self._refits.close()
        self._flusher.close()
        self._reads.close()
        self._ingest.close()
        self.vector_index.close()

    # -- what the parts share ------------------------------------------------------------------------
    def __len__(self) -> int:
        return self._reads.count()

    @property
    def settings(self) -> Settings:
        """The settings every part reads (those the registry was opened with, unless changed since)."""
        return self._state.settings

    @settings.setter
    def settings(self, settings: Settings) -> None:
        self._state.settings = settings

    @property
    def embedder(self) -> Embedder:
        return self._state.embedder

    @embedder.setter
    def embedder(self, embedder: Embedder) -> None:
        """Embed with ``embedder`` from now on (a gateway wraps the registry's in a query batcher)."""
        self._state.embedder = embedder

    @property
    def graph(self) -> DependencyGraph:
        """The dependency graph writes change (readers from other threads use ``dependencies``)."""
        return self._state.graph

    @property
    def loaded_generation(self) -> int:
        """The committed generation the snapshot shows: every write or reload changes it; an unchanged
        re-list does not."""
        return self._state.loaded_generation

    @property
    def foreign_loads(self) -> int:
        """Other processes' commits loaded so far, by ``refresh`` or by a write catching up."""
        return self._state.foreign_loads

    # -- usage examples (Tool2Vec) -------------------------------------------------------------------
    def record_usage(self, tool_id: str, query: str) -> bool:
        """Keep ``query`` (the request that led to a successful call of ``tool_id``) as a usage example.

        What a proxied call costs the registry: an append to an in-memory buffer. Nothing is embedded
        or written here and nothing raises; the flusher writes the buffer in one commit every
        ``Settings.usage_flush_s`` and at ``close``. False when nothing was kept: usage vectors off,
        an unknown or private tool, or ``query`` already the tool's newest example.
        """
        if not self._usage.record(tool_id, query):
            return False
        self._start_flusher()
        return True

    def record_sightings(self, sightings: Sequence[Sighting]) -> int:
        """Keep what the traffic observer saw flow between calls (``toolweave.registry.evidence``): an
        append to the same in-memory buffer as usage examples, written by the same flushes (one commit
        each) into the traffic table and the learned edges (``learned.py``). Sightings about unknown or
        private tools are dropped; returns how many were kept."""
        kept = self._learned.record(sightings)
        if kept:
            self._start_flusher()
        return kept

    def _start_flusher(self) -> None:
        try:
            self._flusher.start()
        except RuntimeError:  # no thread to be had: the next call, or close, writes the buffer
            log.warning("registry %s: could not start the observation flusher", self.path, exc_info=True)

    def flush_observations(self) -> bool:
        """Write the buffered observations now, in one commit (the flusher does it on its cadence).
        True when a generation was committed; a failure keeps the batch for the next flush."""
        return self._flusher.flush()

    def set_private(self, names: Collection[str]) -> None:
        """Tools (by id) or whole sources (by name) whose calls are never recorded as usage examples nor
        as traffic evidence.

        Calls recorded for them are forgotten (buffered or stored); examples a manifest or catalog
        declares stay. Stored traffic evidence naming them goes at the next flush.
        """
        state = self._state
        with state.write_lock:
            if not self._usage.set_private(names):
                return
            with self._commits.writer():
                purged = self._usage.private_calls()
                if purged:
                    self._usage.save(purged)
                    self._commits.commit("usage")
                    self._usage.swap_in()


def _open_database(location: RegistryLocation, settings: Settings) -> RegistryDatabase:
    return RegistryDatabase.open(
        location,
        settings.registry_storage_options,
        lock_url=settings.registry_lock_url or settings.session_store_url,
        lock_ttl_s=settings.registry_lock_ttl_s,
    )
