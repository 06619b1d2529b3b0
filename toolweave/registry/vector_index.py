"""Approximate nearest-neighbour search over the tool table, for registries too large for a matrix.

Below ``Settings.vector_index_threshold`` tools the registry scores every vector in an in-memory numpy
matrix (exact, and faster than any index at that size). Above it the matrix is not held at all: the
vector first pass asks LanceDB, through an HNSW index on the tool table's ``vector`` column (cosine,
``Settings.vector_index_kind``). The default index (IVF-HNSW-FLAT) keeps the full vectors in its graph,
so the distances it returns are exact cosines; a scalar-quantised one (IVF-HNSW-SQ, a third of the
memory) re-ranks its candidates with the full vectors read from the table (``refine_factor``), which
costs more than the graph search itself (random reads of the vector column). Either way the scores
are exact cosines of the tools it finds, as the relevance floor expects.

Rows written after the index was built are still found: LanceDB searches rows no index covers flat
and merges them with the index's results. The registry refreshes the index in the background after
ingests (``refresh``: an incremental merge of the new rows, or a full rebuild once the table has
outgrown what the index was trained on); each refresh is one table version that a registry commit
must name, like every other write (see ``toolweave.registry.database``).
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, get_args

import numpy as np

from toolweave.records import Hit
from toolweave.registry.store import ToolTable, lance_errors, sql_string
from toolweave.registry.usage_fusion import fuse_usage

if TYPE_CHECKING:
    from toolweave.registry.snapshot import Snapshot

__all__ = [
    "INDEX_TYPES",
    "IndexKind",
    "IndexState",
    "RowMap",
    "VectorIndexParams",
    "ann_rank",
    "ann_search",
    "index_state",
    "refresh",
    "row_map",
    "vectors_of",
]

log = logging.getLogger(__name__)

VECTOR_COLUMN = "vector"
INDEX_NAME = f"{VECTOR_COLUMN}_idx"
_REBUILD_GROWTH = 2.0
"""Rebuild (re-train) once the table holds this many times the rows the index was trained on:
incremental merges keep the old partitions and graph, whose quality drifts as the data grows."""

IndexKind = Literal["hnsw_flat", "hnsw_sq"]
INDEX_TYPES: dict[str, IndexKind] = {"IvfHnswFlat": "hnsw_flat", "IvfHnswSq": "hnsw_sq"}
"""LanceDB's ``index_type`` of each kind we build (an index of any other type is rebuilt)."""
_EXACT_KINDS: frozenset[IndexKind] = frozenset({"hnsw_flat"})
"""Kinds whose distances are exact: nothing to refine."""
_UNCOMMITTED_SLACK = 16
"""Extra ANN hits asked for: rows an ingest wrote but has not committed yet are dropped from them."""


@dataclass(frozen=True)
class VectorIndexParams:
    """How the index is searched (see ``Settings.vector_index_*``)."""

    ef: int = 200
    """HNSW search breadth: candidates kept while walking the graph (higher: better recall, slower)."""
    refine_factor: int = 4
    """Candidates re-scored with the full vectors: ``k * refine_factor`` (corrects quantisation error;
    a quantised index only)."""
    kind: IndexKind = "hnsw_flat"
    """The index ``refresh`` builds (an index of another kind is rebuilt)."""


@dataclass(frozen=True)
class IndexState:
    indexed: int
    unindexed: int
    kind: IndexKind | None = None
    """What the index is (None: no index, or one of a type we do not build)."""

    @property
    def exists(self) -> bool:
        return self.indexed > 0

    @property
    def exact(self) -> bool:
        """Searches need no refine: the index holds the full vectors, or there is none (flat search)."""
        return not self.exists or self.kind in _EXACT_KINDS


def index_state(table: ToolTable) -> IndexState:
    """How many rows the vector index covers and how many it does not (no index: ``indexed == 0``)."""
    with lance_errors("reading the vector index statistics"):
        index = next((idx for idx in table.lance.list_indices() if VECTOR_COLUMN in idx.columns), None)
        if index is None:
            return IndexState(0, table.count())
        stats = table.lance.index_stats(INDEX_NAME)
    if stats is None:
        return IndexState(0, table.count())
    kind = INDEX_TYPES.get(str(index.index_type))
    return IndexState(int(stats.num_indexed_rows), int(stats.num_unindexed_rows), kind)


def refresh(table: ToolTable, kind: IndexKind = "hnsw_flat") -> Literal["built", "merged", "current"]:
    """Bring the vector index up to date with the rows: build it (none yet, one of another kind, or
    the table has outgrown it) or merge the unindexed rows into it. Writes a new table version
    (uncommitted: the caller commits it like any other write)."""
    from lancedb.index import HnswFlat, HnswSq

    if kind not in get_args(IndexKind):
        raise ValueError(f"unknown vector index kind {kind!r}")
    state = index_state(table)
    rows = state.indexed + state.unindexed
    wanted = state.exists and state.kind == kind
    if wanted and state.unindexed == 0:
        return "current"
    if wanted and rows < state.indexed * _REBUILD_GROWTH:
        with lance_errors("adding new rows to the vector index"):
            table.lance.optimize()  # merges unindexed rows into the existing index (and compacts)
        return "merged"
    # One IVF partition per ~100k rows: HNSW needs few partitions, and each is one graph in memory.
    partitions = max(1, rows // 100_000)
    config = (HnswFlat if kind == "hnsw_flat" else HnswSq)(distance_type="cosine", num_partitions=partitions)
    with lance_errors(f"building the vector index over {rows} tools"):
        table.lance.create_index(VECTOR_COLUMN, config=config, replace=True)
    return "built"


@dataclass(frozen=True)
class RowMap:
    """Row address → tool id, valid for one version of the tool table.

    With it an ANN search asks LanceDB for row addresses and distances alone; without it LanceDB reads
    the ``id`` of every hit back from the table (a random read per fragment: ~2 ms a query at 100k
    tools, a fifth of the search). Addresses move when rows are rewritten (compaction, updates), so a
    map is used only while the table is at the version it was read at (the caller checks). A stale map
    would lose the rows written since, never mislabel one: Lance never reuses a fragment id, so an
    address names the same row in every version that still has it.
    """

    version: int
    addresses: np.ndarray
    """Sorted row addresses (uint64)."""
    ids: tuple[str, ...]
    """The tool id at each address, in ``addresses`` order."""

    def ids_at(self, addresses: np.ndarray) -> list[str | None]:
        """The tool id at each address (None for one the map does not hold)."""
        if not len(self.addresses):
            return [None] * len(addresses)
        at = np.minimum(np.searchsorted(self.addresses, addresses), len(self.addresses) - 1)
        held = self.addresses[at] == addresses
        return [self.ids[n] if ok else None for n, ok in zip(at.tolist(), held.tolist(), strict=True)]


def row_map(table: ToolTable) -> RowMap:
    """The row address of every tool at the table's current version (one scan of the ``id`` column)."""
    with lance_errors("reading the row addresses"):
        version = table.version
        rows = table.lance.search().select(["id"]).with_row_id(True).limit(None).to_arrow()
    addresses = rows.column("_rowid").to_numpy()
    order = np.argsort(addresses, kind="stable")
    ids = rows.column("id").to_pylist()
    return RowMap(version, addresses[order], tuple(ids[n] for n in order.tolist()))


def ann_search(
    table: ToolTable,
    query: np.ndarray,
    k: int,
    params: VectorIndexParams,
    exclude_sources: Collection[str] = (),
    *,
    refine: bool = True,
    rows: RowMap | None = None,
) -> list[tuple[str, float]]:
    """The ``k`` tools closest to ``query`` (a unit vector) as ``(id, cosine)``, best first.

    Uses the index where there is one and searches the rows it does not cover flat; without an index
    this is an exact (flat) search of the whole table. ``refine``: re-score the candidates with the
    full vectors (needed for exact cosines from a quantised index only: ``IndexState.exact``).
    ``rows``: ids come from this map, of the table's current version (else from the table).
    """
    if k <= 0:
        return []
    factor = params.refine_factor if refine else 1
    search = (
        table.lance.search(query.astype(np.float32), vector_column_name=VECTOR_COLUMN)
        .distance_type("cosine")
        .ef(max(params.ef, k * factor))  # Lance refuses an ef below the candidates it re-scores
        .limit(k)
    )
    search = search.select(["_distance"]).with_row_id(True) if rows else search.select(["id", "_distance"])
    if refine:
        search = search.refine_factor(params.refine_factor)
    if exclude_sources:
        quoted = ", ".join(sql_string(s) for s in sorted(exclude_sources))
        search = search.where(f"source NOT IN ({quoted})", prefilter=True)
    with lance_errors("vector search"):
        found = search.to_arrow()
    distances = found.column("_distance").to_pylist()
    if rows is not None:
        ids = rows.ids_at(found.column("_rowid").to_numpy())
        return [(i, 1.0 - float(d)) for i, d in zip(ids, distances, strict=True) if i is not None]
    ids = found.column("id").to_pylist()
    return [(i, 1.0 - float(d)) for i, d in zip(ids, distances, strict=True)]


def vectors_of(table: ToolTable, ids: Sequence[str]) -> dict[str, np.ndarray]:
    """The stored vectors of ``ids`` (the ones that exist), read from the table."""
    if not ids:
        return {}
    quoted = ", ".join(sql_string(i) for i in ids)
    with lance_errors(f"reading {len(ids)} vectors"):
        rows = table.lance.search().where(f"id IN ({quoted})").select(["id", VECTOR_COLUMN]).to_arrow()
    return dict(zip(rows.column("id").to_pylist(), table.decode_vectors(rows), strict=True))


def ann_rank(
    table: ToolTable,
    snap: Snapshot,
    rows: RowMap | None,
    query_vector: np.ndarray,
    k: int,
    exclude_sources: Collection[str],
    params: VectorIndexParams,
    usage_weight: float,
) -> list[Hit]:
    """The vector first pass of a large registry: the ``k`` tools of ``snap`` closest to the query
    through the ANN index, exact cosines of what it finds, fused with usage vectors (``usage_weight``
    > 0: Tool2Vec). ``rows``: the snapshot's row map when it is of the table's current version."""
    # the table may hold rows of an ingest not committed yet: left out, as in ``Registry.text_hits``
    found = ann_search(
        table,
        query_vector,
        k + _UNCOMMITTED_SLACK,
        params,
        exclude_sources,
        refine=snap.ann_refine,
        rows=rows,
    )
    scores = {i: s for i, s in found if i in snap.sources}
    if snap.usage_rows.size and usage_weight > 0:
        scores = _fuse_usage_candidates(table, snap, query_vector, scores, k, exclude_sources, usage_weight)
    best = sorted(scores.items(), key=lambda item: -item[1])[:k]
    return [Hit(tool_id, score) for tool_id, score in best]


def _fuse_usage_candidates(
    table: ToolTable,
    snap: Snapshot,
    query_vector: np.ndarray,
    scores: dict[str, float],
    k: int,
    exclude_sources: Collection[str],
    usage_weight: float,
) -> dict[str, float]:
    """Tool2Vec without a full score vector: the ANN candidates plus the ``k`` tools whose usage
    vectors match best (text cosines read from the table) are fused as ``SnapshotSearch._rank`` fuses
    every tool. The usage scores are scaled to the candidates' text scores, not every tool's (an
    approximation the in-memory path does not make)."""
    usage_scores = snap.usage_matrix @ query_vector
    best_usage = snap.usage_rows[np.argsort(-usage_scores, kind="stable")[:k]]
    wanted = [snap.ids[r] for r in best_usage if snap.ids[r] not in scores]
    wanted = [i for i in wanted if snap.sources[i] not in exclude_sources]
    scores |= {i: float(v @ query_vector) for i, v in vectors_of(table, wanted).items()}
    ids = list(scores)
    values = np.fromiter(scores.values(), np.float64, len(ids))
    rows = np.fromiter((snap.row_of[i] for i in ids), np.int64, len(ids))
    at = np.minimum(np.searchsorted(snap.usage_rows, rows), snap.usage_rows.size - 1)
    has_usage = snap.usage_rows[at] == rows
    fuse_usage(values, np.flatnonzero(has_usage), usage_scores[at[has_usage]], usage_weight)
    return dict(zip(ids, values.tolist(), strict=True))
