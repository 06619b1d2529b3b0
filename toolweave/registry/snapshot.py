"""What a search reads: the registry's in-memory snapshot, replaced whole after each write."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache, cached_property

import numpy as np

from toolweave.records import ToolRecord
from toolweave.registry.vector_index import RowMap

__all__ = ["TEXT_HIT_CACHE_SIZE", "Snapshot", "TextHitCache", "single_threaded_blas"]

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
