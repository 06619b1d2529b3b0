"""What a search reads: the registry's in-memory snapshot, replaced whole after each write."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import cache, cached_property
from typing import Any, TypeVar, cast

import numpy as np

from toolweave.names import NameVocabulary
from toolweave.records import ToolKind, ToolRecord
from toolweave.registry.store import CompactRecords
from toolweave.registry.vector_index import RowMap

__all__ = ["PROBES", "TEXT_HIT_CACHE_SIZE", "Derived", "Snapshot", "TextHitCache", "single_threaded_blas"]

T = TypeVar("T")

PROBES = 64
"""Tools whose descriptions stand in for requests when something is derived from the fleet itself
(retrieval's fleet calibration: how sure each retriever is here)."""

TEXT_HIT_CACHE_SIZE = 4096
"""Full-text answers kept per snapshot. A find_tools miss of the gateway's cache is usually a known query
in a new conversation context: its vector comes from the embedder's cache and its BM25 hits from here
(the full-text query is the query text alone, whatever the context), which leaves ~1 CPU-ms of the
~5 a LanceDB full-text query costs."""


class TextHitCache:
    """A thread-safe LRU of full-text answers (the searches run on the registry's worker threads)."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._items: OrderedDict[tuple[str, int], list[tuple[str, float]]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: tuple[str, int]) -> list[tuple[str, float]] | None:
        with self._lock:
            hits = self._items.get(key)
            if hits is not None:
                self._items.move_to_end(key)
            return hits

    def put(self, key: tuple[str, int], hits: list[tuple[str, float]]) -> None:
        with self._lock:
            self._items[key] = hits
            while len(self._items) > self._size:
                self._items.popitem(last=False)


class Derived:
    """Values derived from one snapshot, each computed once (the first caller computes, a concurrent one
    waits for it) and dropped with the snapshot."""

    def __init__(self) -> None:
        self._values: dict[str, Any] = {}
        self._lock = threading.Lock()

    def get(self, key: str, compute: Callable[[], T]) -> T:
        with self._lock:
            if key not in self._values:
                self._values[key] = compute()
            return cast(T, self._values[key])


@dataclass(frozen=True)
class Snapshot:
    """Everything a search reads, replaced whole after each write."""

    ids: tuple[str, ...] = ()
    matrix: np.ndarray = field(default_factory=lambda: np.zeros((0, 1), dtype=np.float32))
    records: Mapping[str, ToolRecord] = field(default_factory=dict)
    """Decoded records; ``CompactRecords`` (decoded on access) above the vector-index threshold."""
    hashes: dict[str, str] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)
    source_codes: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int32))
    """Row → index into ``source_names``: excluding sources is one ``np.isin`` per query."""
    source_names: tuple[str, ...] = ()
    usage_rows: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    """Rows (of ``ids``) of the tools that have a usage vector, in ``usage_matrix`` order."""
    usage_matrix: np.ndarray = field(default_factory=lambda: np.zeros((0, 1), dtype=np.float32))
    text_hits: TextHitCache = field(default_factory=lambda: TextHitCache(TEXT_HIT_CACHE_SIZE))
    """BM25 answers by (query, limit) for this snapshot's rows: a new snapshot starts empty."""
    ann: bool = False
    """Vectors are searched through the table's ANN index (``matrix`` is empty): a large registry."""
    ann_refine: bool = False
    """The ANN index is quantised: its candidates are re-scored with the full vectors from the table."""
    rows: RowMap | None = None
    """Row address → id of the tool table (the ANN path), for the version it names."""
    names: NameVocabulary = field(default_factory=NameVocabulary)
    """How many tool names hold each term (retrieval's name match), updated from the last snapshot's."""
    derived: Derived = field(default_factory=Derived, init=False, compare=False)
    """Values computed from this snapshot alone (``probes``); not an init field, so a snapshot made by
    ``dataclasses.replace`` (new usage vectors) starts without its predecessor's."""

    def probes(self, count: int = PROBES) -> list[str]:
        """Descriptions (the name where a tool has none) of ``count`` tools, chosen by content hash: the
        same fleet gives the same probes whatever order its tools were ingested in."""
        chosen = sorted(self.ids, key=lambda tool_id: (self.hashes.get(tool_id, ""), tool_id))[:count]
        records = self.records
        return [records[t].description.strip() or records[t].name for t in chosen]

    def nodes(self) -> Iterator[tuple[str, ToolKind, str]]:
        """``(id, kind, source)`` of every tool, without decoding compact records."""
        records = self.records
        for tool_id in self.ids:
            kind = records.kinds[tool_id] if isinstance(records, CompactRecords) else records[tool_id].kind
            yield tool_id, kind, self.sources[tool_id]

    @cached_property
    def row_of(self) -> dict[str, int]:
        """Tool id → its row (of ``ids``), built on first use (the ANN path's Tool2Vec fusion)."""
        return {tool_id: n for n, tool_id in enumerate(self.ids)}


@cache
def single_threaded_blas() -> None:
    """One BLAS thread: the query matrix-vector product is memory-bound (10k x 384 takes 0.5 ms on one
    core), and a multi-threaded BLAS fights onnxruntime's spinning threads for the same cores, which
    doubled embed + search time on 2 cores (8 ms vs 4 ms, measured). A process-wide setting, so it is
    made once per process (``cache``), at the first registry opened, not on every reload."""
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=1, user_api="blas")
