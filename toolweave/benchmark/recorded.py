"""A first pass recorded once and replayed: every retrieval variant scored without searching again.

Vector and full-text hits of a query do not depend on fusion, floor or walk settings, so a benchmark
that compares methods (or an experiment that sweeps a setting) records each query's two candidate
lists once, deep enough for every variant, and replays them through the real pipeline
(``toolweave.retrieval.retrieve``) as a ``SearchIndex``. Only latency is lost: it is not measured on
replays.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

from toolweave.errors import RetrievalError
from toolweave.names import NameVocabulary
from toolweave.records import (
    DependencyEdge,
    EdgeKind,
    Hit,
    QueryVariant,
    SearchResults,
    SearchScope,
    ToolRecord,
)
from toolweave.retrieval.pipeline import SearchIndex

__all__ = ["RECORD_DEPTH", "RecordedGraph", "RecordedIndex"]

T = TypeVar("T")

RECORD_DEPTH = 50
"""Candidates recorded per retriever: above the pipeline's fusion pool (30) and any ``final_k`` we score."""


@dataclass(eq=False)
class RecordedIndex:
    """Replays recorded ``(vector hits, text hits)`` per query text; records misses from ``live``.

    The live index's calibrations (``SearchIndex.calibration``: the fleet calibration) are recorded
    too, so a replay ranks as the live index would.
    """

    live: SearchIndex | None = None
    records: dict[str, ToolRecord] = field(default_factory=dict)
    """Tool id → record (the floor reads ``destructive``; a replay without a live index needs them)."""
    hits: dict[QueryVariant, tuple[list[Hit], list[Hit]]] = field(default_factory=dict)
    calibrations: dict[str, Any] = field(default_factory=dict)
    _names: NameVocabulary | None = field(default=None, repr=False)

    def view(self) -> RecordedIndex:
        """Another index sharing these recordings (and recording into them)."""
        return RecordedIndex(
            live=self.live, records=self.records, hits=self.hits, calibrations=self.calibrations
        )

    def record(self, queries: Sequence[QueryVariant]) -> None:
        """Search every not yet recorded query once on the live index."""
        todo = [q for q in dict.fromkeys(queries) if q not in self.hits]
        if not todo:
            return
        if self.live is None:
            raise RetrievalError("a recorded index without a live index cannot search new queries")
        for query, both in zip(todo, self.live.search(todo, RECORD_DEPTH), strict=True):
            self.hits[query] = both

    def search(
        self, queries: Sequence[QueryVariant], k: int, scope: SearchScope | None = None
    ) -> SearchResults:
        scope = scope or SearchScope()
        if scope.exclude_sources:
            raise RetrievalError("a recorded index cannot exclude sources")
        if k > RECORD_DEPTH:
            raise RetrievalError(f"recorded {RECORD_DEPTH} candidates per retriever, {k} asked")
        self.record(queries)
        out = []
        for query in queries:
            vector_hits, text_hits = self.hits[query]
            out.append((vector_hits[:k] if scope.vector else [], text_hits[:k] if scope.text else []))
        return out

    def name_vocabulary(self) -> NameVocabulary:
        """The live index's, else one over the recorded tools (the names a registry would count)."""
        if self.live is not None:
            return self.live.name_vocabulary()
        if self._names is None or self._names.size != len(self.records):
            names = {i: r.name for i, r in self.records.items()}
            self._names = NameVocabulary.of(self.records, names)
        return self._names

    def calibration(self, key: str, compute: Callable[[Sequence[str]], T]) -> T:
        """The live index's, recorded on first use (a replay without a live index needs it recorded)."""
        if key not in self.calibrations:
            if self.live is None:
                raise RetrievalError(f"a recorded index without a live index has no {key!r} calibration")
            self.calibrations[key] = self.live.calibration(key, compute)
        return cast(T, self.calibrations[key])

    def is_destructive(self, tool_id: str) -> bool:
        record = self.records.get(tool_id)
        if record is not None:
            return record.destructive
        return self.live is not None and self.live.is_destructive(tool_id)


class RecordedGraph:
    """A registry's dependency look-up frozen as ``tool id → edges`` (in the registry's own order)."""

    def __init__(self, dependencies: Mapping[str, Sequence[DependencyEdge]]) -> None:
        self._out = {tool: list(edges) for tool, edges in dependencies.items() if edges}

    def __call__(self, tool_id: str, kinds: Sequence[EdgeKind] | None = None) -> list[DependencyEdge]:
        edges = self._out.get(tool_id, [])
        return edges if kinds is None else [e for e in edges if e.kind in kinds]
