"""The ready table ranked as the gateway ranks: its vectors, its BM25, the product's own pipeline.

The ready table (``server/turns/ready_index.py``) answers ``find_tools`` while a gateway starts. By BM25
alone it ranks well below the gateway's hybrid search (mAP@10 0.63 against 0.85 on BFCL multi-turn:
bench/RESULTS.md, "Useful from the first request"). What the hybrid search needs from LanceDB, a
gateway leaves beside the table when it writes it (``search_files``): every tool's vector (float16, in
table order), the dependency edges the walk follows, the tools' own names, sources and destructive
flags. What it needs besides is the request's vector: ``attach`` (run on a thread by
``ready_index.rank_in_background`` as soon as the settings are loaded, before LanceDB is imported) loads
the query encoder without fastembed (``registry/query_encoder.py``: the same numbers) and then gives
the table its ``ranker``: ``retrieval.pipeline.retrieve`` over ``ReadySearch``, a ``SearchIndex`` made of
those vectors and the table's BM25. A table whose model is not the configured one, or whose vectors do
not match it, keeps BM25.

What a fleet learned from its traffic travels too, in the same file after the tools' rows: the usage
vectors of the tools that have them (Tool2Vec, fused as ``registry/usage_fusion.py`` fuses them) and the
fleet's request map with the tools it saw traffic for (``registry/fleet_fit.py``: applied under the same
gate). A launch's first answers then rank as the adapted gateway's do, not as a cold one's. Not there: the
fleet calibration (off by default) is computed from the table's own descriptions rather than the
snapshot's probes.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from toolweave.names import NameVocabulary
from toolweave.records import DependencyEdge, EdgeKind, Hit, QueryVariant, SearchResults, SearchScope
from toolweave.registry.fleet_fit import gated_scores
from toolweave.registry.usage_fusion import fuse_usage
from toolweave.retrieval.pipeline import retrieve
from toolweave.retrieval.query import CONTEXT_WEIGHT
from toolweave.server.turns import ready_index
from toolweave.server.turns.ready_index import ReadyIndex, ReadyTool, answer_document

if TYPE_CHECKING:
    from toolweave.records import ToolRecord
    from toolweave.registry import Registry
    from toolweave.registry.query_encoder import QueryEncoder
    from toolweave.settings import RetrievalSettings

__all__ = ["ReadyRanker", "ReadySearch", "ReadyVectors", "attach", "prepare", "run", "search_files"]

log = logging.getLogger(__name__)

T = TypeVar("T")

_PROBES = 64
"""Descriptions the fleet calibration probes with (the registry's ``Snapshot.PROBES`` count)."""


def search_files(registry: Registry, records: Sequence[ToolRecord]) -> tuple[dict[str, Any], bytes] | None:
    """What the table carries for ``records`` (its rows, in order) beyond their texts, and their vectors
    as float16 bytes; None when the registry lacks a vector of one of them. The model is the one the
    registry serves with (a registry built with an earlier default keeps it: ``Registry.open``)."""
    model = registry.embedder.model_id
    ids = [r.id for r in records]
    vectors = registry.vectors()
    if any(i not in vectors for i in ids):
        return None
    matrix = np.stack([np.asarray(vectors[i], dtype=np.float32) for i in ids]) if ids else np.zeros((0, 0))
    blocks = [matrix]
    learned: dict[str, Any] = {}
    settings = registry.settings
    if ids and settings.usage_weight > 0:
        rows, usage = registry.usage_vectors(ids)
        if rows.size:
            blocks.append(usage)
            learned["usage"] = {"rows": rows.tolist(), "weight": settings.usage_weight}
    fleet = registry.fleet_map.current() if ids and settings.fleet_map else None
    if fleet is not None and fleet.model == model:  # a map of another model's requests is left alone
        blocks.append(fleet.w)
        learned["fleet_map"] = {"reached": None if fleet.reached is None else sorted(fleet.reached)}
    data = np.ascontiguousarray(np.concatenate(blocks), dtype="<f2").tobytes()
    edges = [
        e.model_dump(mode="json", exclude={"evidence", "reason"})
        for i in ids
        for e in registry.dependencies(i)
    ]
    search = {
        "model": model,
        "dim": int(matrix.shape[1]) if ids else 0,
        "sha256": hashlib.sha256(data).hexdigest(),
        "names": [r.name for r in records],
        "sources": [r.source for r in records],
        "destructive": [r.id for r in records if r.destructive],
        "edges": edges,
        **learned,
    }
    return search, data


@dataclass(frozen=True)
class ReadyVectors:
    """What the table's vectors file holds: the tools' vectors, then what the fleet learned."""

    tools: np.ndarray
    usage_rows: np.ndarray
    """Rows (of ``tools``) that have a usage vector, in ``usage`` order."""
    usage: np.ndarray
    usage_weight: float
    fleet_map: np.ndarray | None
    reached: frozenset[str] | None
    """The tools the map saw traffic for (None: every tool)."""

    @classmethod
    def plain(cls, tools: np.ndarray) -> ReadyVectors:
        """Tool vectors alone: a fleet that learned nothing yet."""
        empty = np.zeros((0, tools.shape[1]), dtype=np.float32)
        return cls(tools, np.zeros(0, dtype=np.int64), empty, 0.0, None, None)


class ReadySearch:
    """A ``SearchIndex`` (and the walk's dependency look-up) over a ready table: its vectors and its BM25."""

    def __init__(self, table: ReadyIndex, vectors: ReadyVectors, encoder: QueryEncoder) -> None:
        search = table.search_data or {}
        self.table = table
        self.vectors = vectors
        self.matrix = vectors.tools
        self.encoder = encoder
        self.ids = [t.id for t in table.tools]
        self._sources: dict[str, str] = dict(zip(self.ids, search.get("sources", ()), strict=False))
        self._source_codes = np.array([self._sources.get(i, "") for i in self.ids], dtype=object)
        self._destructive = frozenset(search.get("destructive", ()))
        names = dict(zip(self.ids, search.get("names", ()), strict=False))
        self._names = NameVocabulary.of(self.ids, names)
        self._deps: dict[str, list[DependencyEdge]] = {}
        for raw in search.get("edges", ()):
            edge = DependencyEdge.model_validate(raw)
            self._deps.setdefault(edge.tool, []).append(edge)
        self._calibrations: dict[str, Any] = {}

    def as_configured(self, usage_weight: float, fleet_map: bool) -> ReadySearch:
        """This table as a gateway with these settings ranks (a table keeps what the fleet learned as
        the gateway that wrote it was set): usage vectors at ``usage_weight``, none at 0; the request
        map only while ``fleet_map`` is on."""
        vectors = self.vectors
        configured = replace(
            vectors,
            usage_weight=usage_weight,
            usage_rows=vectors.usage_rows if usage_weight > 0 else np.zeros(0, dtype=np.int64),
            fleet_map=vectors.fleet_map if fleet_map else None,
        )
        return ReadySearch(self.table, configured, self.encoder)

    def search(
        self, queries: Sequence[QueryVariant], k: int, scope: SearchScope | None = None
    ) -> SearchResults:
        scope = scope or SearchScope()
        excluded = scope.exclude_sources
        embedded: dict[str, np.ndarray] = {}
        if scope.vector:
            parts = list(dict.fromkeys(p for q in queries for p in q))
            embedded = dict(zip(parts, self.encoder.embed_queries(parts), strict=True))
        out: SearchResults = []
        for variant in queries:
            vector_hits = self._rank(self._composed(variant, embedded), k, excluded) if scope.vector else []
            text_hits = self._text(variant[0], k, excluded) if scope.text else []
            out.append((vector_hits, text_hits))
        return out

    @staticmethod
    def _composed(variant: QueryVariant, embedded: dict[str, np.ndarray]) -> np.ndarray:
        """The registry's composition: the request's vector plus its context's, older ones weighing less."""
        composed = embedded[variant[0]] + sum(
            (CONTEXT_WEIGHT**n * embedded[p] for n, p in enumerate(variant[1:], 1)),
            np.zeros_like(embedded[variant[0]]),
        )
        unit: np.ndarray = composed / (np.linalg.norm(composed) or 1.0)
        return unit

    def _rank(self, vector: np.ndarray, k: int, excluded: Collection[str]) -> list[Hit]:
        if not self.ids or k <= 0:
            return []
        learned = self.vectors
        scores = (
            self.matrix @ vector
            if learned.fleet_map is None
            else gated_scores(self.matrix, self.ids, vector, learned.fleet_map, learned.reached)
        )
        if learned.usage_rows.size:
            fuse_usage(scores, learned.usage_rows, learned.usage @ vector, learned.usage_weight)
        if excluded:
            scores = np.where(np.isin(self._source_codes, list(excluded)), -np.inf, scores)
        k = min(k, len(self.ids))
        top = np.argpartition(-scores, k - 1)[:k]
        top = top[np.argsort(-scores[top], kind="stable")]
        return [Hit(self.ids[i], float(scores[i])) for i in top if np.isfinite(scores[i])]

    def _text(self, query: str, k: int, excluded: Collection[str]) -> list[Hit]:
        extra = k * 2 if excluded else 0
        hits = self.table.search(query, k + extra)
        return [Hit(t.id, s) for t, s in hits if self._sources.get(t.id) not in excluded][:k]

    def is_destructive(self, tool_id: str) -> bool:
        return tool_id in self._destructive

    def name_vocabulary(self) -> NameVocabulary:
        return self._names

    def calibration(self, key: str, compute: Callable[[Sequence[str]], T]) -> T:
        if key not in self._calibrations:
            chosen = sorted(self.table.tools, key=lambda t: t.id)[:_PROBES]
            self._calibrations[key] = compute([t.entry.get("description") or t.name for t in chosen])
        found: T = self._calibrations[key]
        return found

    def dependencies(self, tool_id: str, kinds: Sequence[EdgeKind] | None = None) -> list[DependencyEdge]:
        return [e for e in self._deps.get(tool_id, ()) if kinds is None or e.kind in kinds]

    def source_of(self, tool_id: str) -> str | None:
        return self._sources.get(tool_id)


class ReadyRanker:
    """``ReadyIndex.ranker``: ``find_tools`` documents as the gateway's ``retrieve`` ranks them."""

    def __init__(self, index: ReadySearch, params: RetrievalSettings) -> None:
        self.index = index
        self.params = params
        self.by_id = {t.id: t for t in index.table.tools}

    def ranked(self, query: str, k: int) -> list[tuple[ReadyTool, Any]]:
        params = self.params
        if k != params.final_k:  # as the gateway's find_tools takes its ``k``
            params = params.model_copy(update={"final_k": k, "top_k": min(params.top_k, k)})
        ranked = retrieve(query, self.index, self.index.dependencies, params, source_of=self.index.source_of)
        return [(self.by_id[r.tool_id], r) for r in ranked[:k] if r.tool_id in self.by_id]

    def __call__(self, query: str, k: int) -> tuple[dict[str, Any], list[str]]:
        found = self.ranked(query, k)
        chosen = [(t, r) for t, r in found if r.publish]
        doc = answer_document([t for t, _ in chosen], [t for t, r in found if not r.publish])
        for entry, (_, r) in zip(doc["tools"], chosen, strict=True):
            if r.reason == "dependency" and r.via in self.by_id:  # what it feeds, as the gateway says
                fed = f".{r.parameter_name}" if r.parameter_name else ""
                entry["why"] = f"feeds {self.by_id[r.via].name}{fed}"
        return doc, [t.id for t, _ in chosen]


def _accepts(configured: str, written_with: object) -> bool:
    """Whether a gateway configured with ``configured`` (``ready_index.configured_model``) serves with the
    model a table was ``written_with``."""
    if configured != ready_index.ANY_SHIPPED_MODEL:
        return written_with == configured
    from toolweave.registry.models import shipped

    return isinstance(written_with, str) and shipped(written_with)


def _vectors(home: str, table: ReadyIndex, model: str) -> ReadyVectors | None:
    """The table's vectors as float32, or None (another model, a missing or mismatched file)."""
    search = table.search_data
    if search is None or not _accepts(model, search.get("model")):
        log.info(
            "ready table: %s, the configured model is %s: first answers by BM25",
            f"vectors of {search.get('model')}" if search else "no vectors",
            model,
        )
        return None
    path = ready_index.vectors_path(home)
    dim = search.get("dim")
    try:
        data = path.read_bytes() if path is not None else b""
    except OSError as exc:
        log.info("ready table: no vectors (%s): first answers by BM25", exc)
        return None
    usage: dict[str, Any] = search["usage"] if isinstance(search.get("usage"), dict) else {}
    fleet: dict[str, Any] | None = search["fleet_map"] if isinstance(search.get("fleet_map"), dict) else None
    try:
        usage_rows = np.asarray(usage.get("rows", []), dtype=np.int64)
        weight = float(usage.get("weight", 0.0))
        reached = fleet.get("reached") if fleet is not None else None
        reached_ids = None if reached is None else frozenset(str(t) for t in reached)
    except (TypeError, ValueError):
        usage_rows, weight, reached_ids, fleet = np.zeros(0, dtype=np.int64), 0.0, None, None
    n = len(table.tools)
    rows = n + usage_rows.size + (dim if fleet is not None and type(dim) is int else 0)
    bad_rows = usage_rows.ndim != 1 or bool(np.any((usage_rows < 0) | (usage_rows >= n)))
    if type(dim) is not int or dim <= 0 or len(data) != 2 * dim * rows or bad_rows:
        log.info("ready table: its vectors do not match it: first answers by BM25")
        return None
    if hashlib.sha256(data).hexdigest() != search.get("sha256"):
        log.info("ready table: its vectors changed since it was written: first answers by BM25")
        return None
    matrix: np.ndarray = np.frombuffer(data, dtype="<f2").reshape(rows, dim).astype(np.float32)
    end = n + usage_rows.size
    return ReadyVectors(
        tools=matrix[:n],
        usage_rows=usage_rows,
        usage=matrix[n:end],
        usage_weight=weight,
        fleet_map=matrix[end:] if fleet is not None else None,
        reached=reached_ids,
    )


def prepare(home: str, model: str, *, warm: Iterable[str] = ("warm up",)) -> ReadySearch | None:
    """``home``'s ready table as a ``SearchIndex`` for ``model``: its vectors and the query encoder loaded
    (run once on ``warm``); None without a table, or when its vectors are not ``model``'s."""
    log.debug("ready table: loading its vectors and the query encoder of %s", model)
    table = ready_index.load(home)
    if table is None:
        return None
    vectors = _vectors(home, table, model)
    if vectors is None:
        return None
    from toolweave.registry.query_encoder import QueryEncoder

    encoder = QueryEncoder(str((table.search_data or {})["model"]))  # the one ``_vectors`` accepted
    encoder.embed_queries(list(warm))
    return ReadySearch(table, vectors, encoder)


def attach(
    home: str, model: str, params: RetrievalSettings, learned: tuple[float, bool] | None = None
) -> bool:
    """Give ``home``'s ready table its ``ranker`` (``model``: the configured embedding model, ``params``
    the retrieval settings, ``learned`` their ``usage_weight`` and ``fleet_map``, None: as the table was
    written). Whether the table ranks so now."""
    table = ready_index.load(home)
    if table is not None and table.ranker is not None:
        return True
    index = prepare(home, model)
    if index is not None:
        _rank(index, params, learned)
    return index is not None


def run(ranking: ready_index.Ranking) -> None:
    """``ready_index.rank_in_background``'s thread: before the settings named the configured model, the
    table's own model is prepared, and used once they name the same one."""
    if ranking.confirmed.is_set():
        attach(ranking.home, str(ranking.model), ranking.params, ranking.learned)  # type: ignore[arg-type]
        return
    table = ready_index.load(ranking.home)
    written_with = (table.search_data or {}).get("model") if table is not None else None
    index = prepare(ranking.home, written_with) if isinstance(written_with, str) else None
    ranking.confirmed.wait()
    if index is None:
        attach(ranking.home, str(ranking.model), ranking.params, ranking.learned)  # type: ignore[arg-type]
    elif not _accepts(str(ranking.model), written_with):
        log.info(
            "ready table: vectors of %s, the configured model is %s: first answers by BM25",
            written_with,
            ranking.model,
        )
    elif index.table.ranker is None:
        _rank(index, ranking.params, ranking.learned)  # type: ignore[arg-type]


def _rank(index: ReadySearch, params: RetrievalSettings, learned: tuple[float, bool] | None = None) -> None:
    if learned is not None:
        index = index.as_configured(*learned)
    index.table.ranker = ReadyRanker(index, params)
    log.debug("ready table: ranking with %s's vectors (%d tools)", index.encoder.model_name, len(index.ids))
