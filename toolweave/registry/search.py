"""Reads over the snapshot: look-ups, the dependency edges retrieval walks, and the searches it runs.

Everything here reads the shared state's read model (``RegistryState.snap``, ``deps``, ``edges``), which
writes and reloads replace whole: a read on any thread sees one completed write, never half of one, and
takes no lock. Vector search is exact over the in-memory matrix below ``Settings.vector_index_threshold``
tools and goes through the table's ANN index above it; full-text search asks LanceDB's BM25 index.
``toolweave.retrieval`` ranks with these (the registry never imports retrieval).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection, Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import TypeVar

import numpy as np

from toolweave.errors import RegistryError, ToolNotFound
from toolweave.inference import walkable
from toolweave.names import NameVocabulary, name_of, name_words
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
from toolweave.registry.database import is_uri
from toolweave.registry.fleet_fit import GATE_TOP, FleetMap, gated_scores
from toolweave.registry.outage import Outage
from toolweave.registry.snapshot import Snapshot
from toolweave.registry.state import RegistryState
from toolweave.registry.store import CompactRecords
from toolweave.registry.usage_fusion import fuse_usage
from toolweave.registry.vector_index import ann_rank
from toolweave.registry.vector_rows import VectorRows
from toolweave.registry.vector_upkeep import VectorIndexUpkeep
from toolweave.tracing import span

__all__ = ["SnapshotSearch"]

T = TypeVar("T")

log = logging.getLogger(__name__)


class SnapshotSearch:
    """Look-ups and searches over the last completed write's snapshot (safe from any thread)."""

    def __init__(self, state: RegistryState, upkeep: VectorIndexUpkeep) -> None:
        self._state = state
        self._upkeep = upkeep
        self._pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="toolweave-fts")
        where = str(state.path).replace("%", "%%")
        self.text_outage = Outage(
            log,
            f"registry {where}: full-text search failed, vector search only: %s",
            f"registry {where}: full-text search works again",
        )
        """The full-text index lives in the store: while it fails or hangs, searches rank by vectors."""

    def close(self) -> None:
        self._pool.shutdown(wait=False)

    # -- look-ups ------------------------------------------------------------------------------------
    def count(self) -> int:
        return len(self._state.snap.ids)

    def get(self, tool_id: str) -> ToolRecord:
        record = self._state.snap.records.get(tool_id)
        if record is None:
            raise ToolNotFound(f"no tool {tool_id!r} in registry {self._state.path}")
        return record

    def find(self, tool_id: str) -> ToolRecord | None:
        return self._state.snap.records.get(tool_id)

    def is_destructive(self, tool_id: str) -> bool:
        """Whether the tool says it may destroy data (``ToolRecord.destructive``; False for an unknown
        tool), without decoding a large registry's records that cannot be."""
        records = self._state.snap.records
        if isinstance(records, CompactRecords):
            return records.is_destructive(tool_id)
        record = records.get(tool_id)
        return record is not None and record.destructive

    def name_vocabulary(self) -> NameVocabulary:
        """How many tool names hold each term, as of the last completed write (retrieval's name match)."""
        return self._state.snap.names

    def calibration(self, key: str, compute: Callable[[Sequence[str]], T]) -> T:
        """``compute(probes)`` once per snapshot, kept with it (``Snapshot.derived``): retrieval's fleet
        calibration. ``probes`` are texts of the snapshot's own tools (``Snapshot.probes``)."""
        snap = self._state.snap
        return snap.derived.get(key, lambda: compute(snap.probes()))

    def loosely_named(self, name: str) -> tuple[str, ...]:
        """The ids of tools ``name`` may mean once case and separators are set aside (``name_words``:
        ``Time/getCurrentTime`` is ``time get current time``): by their id (``time.get_current_time``) or
        by their own name at the backend (``get_current_time``)."""
        snap = self._state.snap
        return snap.derived.get("loose-names", lambda: _loose_names(snap.ids)).get(name_words(name), ())

    def source_of(self, tool_id: str) -> str | None:
        """The source ``tool_id`` came from (None for an unknown tool)."""
        return self._state.snap.sources.get(tool_id)

    def tools(self, source: str | None = None) -> list[ToolRecord]:
        snap = self._state.snap
        return [snap.records[i] for i in snap.ids if source is None or snap.sources[i] == source]

    def content_hashes(self) -> dict[str, str]:
        """Tool id → content hash, as of the last completed write or reload (never changed in place)."""
        return self._state.snap.hashes

    def sources(self) -> list[str]:
        return sorted(set(self._state.snap.sources.values()))

    def vectors(self) -> VectorRows:
        """Tool id → unit vector, for graph inference and diagnostics (read from the table when the
        registry is large enough to keep no matrix)."""
        snap = self._state.snap
        if snap.ann:
            return self._state.table.load_vectors()
        return VectorRows(snap.ids, snap.matrix)

    # -- the dependency graph, as retrieval walks it --------------------------------------------------
    def edges(self) -> tuple[DependencyEdge, ...]:
        """Every dependency edge, as of the last completed write."""
        return self._state.edges

    def dependencies(self, tool_id: str, kinds: Sequence[EdgeKind] | None = None) -> list[DependencyEdge]:
        """What ``tool_id`` needs, as of the last completed write, as the retrieval walk is given it: learned
        edges below ``Settings.infer_min_confidence`` are left out; inferred ones are kept at any
        confidence, which the walk weighs them by (``inference.weighed``)."""
        return [e for e in self._state.deps.get(tool_id, ()) if kinds is None or e.kind in kinds]

    def dependents(self, tool_id: str, kinds: Sequence[EdgeKind] | None = None) -> list[DependencyEdge]:
        """The edges into ``tool_id`` (from the tools that consume what it produces) that the walk may
        follow, as of the last completed write: weak inferred and learned ones are left out (an edge
        below ``Settings.infer_min_confidence`` publishes nothing after a call either)."""
        floor = self._state.settings.infer_min_confidence
        into = [
            e for e in self._state.edges if e.depends_on == tool_id and (kinds is None or e.kind in kinds)
        ]
        return walkable(into, floor)

    # -- search --------------------------------------------------------------------------------------
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
        # an object store that failed or hung is left alone until a probe; a local disk is asked each time
        text = scope.text and not (is_uri(self._state.path) and self.text_outage.skip())
        pending = (
            [self._pool.submit(self.text_hits, q[0], k, exclude_sources) for q in queries] if text else []
        )
        ranked: list[list[Hit]] = [[] for _ in queries]
        if scope.vector:
            fleet = self._state.fleet_map if self._state.settings.fleet_map else None
            parts = list(dict.fromkeys(p for q in queries for p in q))
            embedded = dict(zip(parts, self._state.embedder.embed_queries(parts), strict=True))
            for n, variant in enumerate(queries):
                composed = (
                    embedded[variant[0]]
                    + sum(  # older context weighs less (decay)
                        (CONTEXT_WEIGHT**n * embedded[p] for n, p in enumerate(variant[1:], 1)),
                        np.zeros_like(embedded[variant[0]]),
                    )
                )
                unit = composed / (np.linalg.norm(composed) or 1.0)
                ranked[n] = self._rank(unit, k, exclude_sources, fleet)
        texts = self._text_results(pending) if text else [[] for _ in queries]
        return list(zip(ranked, texts, strict=True))

    def _text_results(self, pending: list[Future[list[Hit]]]) -> list[list[Hit]]:
        """The full-text answers, each waited for at most until the read deadline of an object store
        (``Settings.registry_read_deadline_s``; a local disk has none): a hung store costs a search
        that long once per probe, then nothing until the next probe (``Outage``)."""
        wait_s = self._state.settings.registry_read_deadline_s if is_uri(self._state.path) else None
        deadline = None if wait_s is None else time.monotonic() + wait_s
        out: list[list[Hit]] = []
        for future in pending:
            try:
                out.append(future.result(None if deadline is None else max(0.0, deadline - time.monotonic())))
            except FutureTimeout:
                self.text_outage.failed(f"no answer within {wait_s} s")
                out.append([])
        return out

    def _rank(
        self,
        query_vector: np.ndarray,
        k: int,
        exclude_sources: Collection[str],
        fleet: FleetMap | None = None,
    ) -> list[Hit]:
        """The ``k`` best tools by vector. ``fleet``: the fleet's request map, applied where the request
        meets the tool vectors it was fitted against, when the request's nearest tools without it all had
        traffic (``FleetMap.covers``); usage vectors are requests themselves, so they meet the request as
        it was embedded (an ANN search has one vector for both: the mapped one)."""
        snap = self._state.snap
        if not snap.ids or k <= 0:
            return []
        if snap.ann:
            if fleet is not None:
                first = self._ann_rank(snap, query_vector, GATE_TOP, exclude_sources, usage=False)
                if fleet.covers(h.tool_id for h in first):
                    query_vector = fleet.apply(query_vector)
            return self._ann_rank(snap, query_vector, k, exclude_sources)
        scores = (
            snap.matrix @ query_vector
            if fleet is None  # else mapped only when its nearest tools all had traffic (``FleetMap.covers``)
            else gated_scores(snap.matrix, snap.ids, query_vector, fleet.w, fleet.reached)
        )
        if snap.usage_rows.size and self._state.usage_on:
            # Tool2Vec: tools with usage examples also score by how close the query is to them
            weight = self._state.settings.usage_weight
            fuse_usage(scores, snap.usage_rows, snap.usage_matrix @ query_vector, weight)
        if exclude_sources:
            excluded = [n for n, name in enumerate(snap.source_names) if name in exclude_sources]
            scores = np.where(np.isin(snap.source_codes, excluded), -np.inf, scores)
        k = min(k, len(snap.ids))
        top = np.argpartition(-scores, k - 1)[:k]
        top = top[np.argsort(-scores[top], kind="stable")]
        return [Hit(snap.ids[i], float(scores[i])) for i in top if np.isfinite(scores[i])]

    def _ann_rank(
        self,
        snap: Snapshot,
        query_vector: np.ndarray,
        k: int,
        exclude_sources: Collection[str],
        *,
        usage: bool = True,
    ) -> list[Hit]:
        state = self._state
        usage_weight = state.settings.usage_weight if usage and state.usage_on else 0.0
        rows = snap.rows
        if rows is None or rows.version != state.table.version:
            rows = None  # none yet, or a write moved the table on: ids read from the table meanwhile
            self._upkeep.remap_rows_later()
        return ann_rank(
            state.table, snap, rows, query_vector, k, exclude_sources, self._upkeep.params, usage_weight
        )

    def text_hits(self, query: str, k: int, exclude_sources: Collection[str] = ()) -> list[Hit]:
        """BM25 over tool documents through LanceDB's full-text index."""
        if k <= 0:
            return []
        state = self._state
        snap = state.snap  # answers cached on the snapshot: its swap after a write invalidates them
        sources = snap.sources
        extra = k * 2 if exclude_sources else 0
        key = (query, k + extra)
        hits = snap.text_hits.get(key)
        if hits is None:
            try:
                hits = state.table.text_search(query, k + extra)
            except RegistryError as exc:
                # The index lives in the store (an object store may be down): the vector half, held in
                # memory, still answers. Not cached, so the first search after the outage uses BM25 again.
                self.text_outage.failed(exc)
                return []
            self.text_outage.succeeded()
            snap.text_hits.put(key, hits)
        return [Hit(i, s) for i, s in hits if i in sources and sources[i] not in exclude_sources][:k]


def _loose_names(ids: Iterable[str]) -> dict[str, tuple[str, ...]]:
    """``name_words`` of each id and of its name part → the ids, for ``loosely_named``."""
    found: dict[str, set[str]] = {}
    for tool_id in ids:
        for key in {name_words(tool_id), name_words(name_of(tool_id))}:
            found.setdefault(key, set()).add(tool_id)
    return {key: tuple(sorted(tool_ids)) for key, tool_ids in found.items()}
