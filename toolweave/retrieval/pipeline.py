"""Graph RAG-Tool Fusion end to end, over any index that can search (pure: the index does the I/O).

query → clean / contextual rewrites → first pass (vector | bm25 | hybrid: fused per query)
      → [grtf] walk of the top_k hits' dependencies → top final_k
      → relevance floor: marks which tools to publish (the list is not cut)
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from typing import Protocol, TypeVar

from toolweave.errors import RetrievalError
from toolweave.names import NameVocabulary
from toolweave.records import DependencyEdge, EdgeKind, SearchResults, SearchScope
from toolweave.retrieval.credentials import holds_credential, signed_in_filter, without_credentials
from toolweave.retrieval.decompose import Decomposition
from toolweave.retrieval.floor import apply_floor, mark_published
from toolweave.retrieval.fusion import FleetCalibration, calibrate, fixed_weight, fuse, turn_relevance
from toolweave.retrieval.name_match import match_names
from toolweave.retrieval.query import QueryVariant, clean_query, contextual_query
from toolweave.retrieval.results import Hit, RankedTool
from toolweave.retrieval.walk import DependencyLookup, expand_with_dependencies
from toolweave.settings import RetrievalMethod, RetrievalSettings, Settings

__all__ = [
    "SearchIndex",
    "ToolIndex",
    "candidates",
    "decomposition_of",
    "first_pass",
    "fleet_calibration",
    "retrieve",
    "retrieve_tools",
    "scored_first_pass",
]

_MIN_POOL = 30  # first-pass candidates per retriever before fusion: fusion needs overlap to work

T = TypeVar("T")


class SearchIndex(Protocol):
    """What retrieval needs from a registry."""

    def search(
        self, queries: Sequence[QueryVariant], k: int, scope: SearchScope | None = None
    ) -> SearchResults:
        """``(vector hits, text hits)`` for each query variant, within ``scope`` (default: every source,
        both sides).

        A variant is a query text, optionally followed by context texts: its vector is the normalised
        ``v(query) + sum(CONTEXT_WEIGHT**n * v(context_n))``; its full-text query is the query text alone
        (old words would outvote new ones in BM25). An index may compute all variants at once.
        """
        ...

    def is_destructive(self, tool_id: str) -> bool:
        """Whether the tool says it may destroy data (the relevance floor asks more of it)."""
        ...

    def name_vocabulary(self) -> NameVocabulary:
        """How many of this fleet's tool names hold each term (the name match weighs terms by it)."""
        ...

    def calibration(self, key: str, compute: Callable[[Sequence[str]], T]) -> T:
        """``compute(probes)``, computed once per version of the index (a registry snapshot) and kept
        with it under ``key``. ``probes`` are texts of the fleet's own tools (a fixed sample of their
        descriptions), the fleet's stand-in for requests: what is derived from them depends on the
        fleet alone, never on the requests served before."""
        ...


class ToolIndex(SearchIndex, Protocol):
    """A whole registry as retrieval sees it (read-only): search, the walkable dependency edges, each
    tool's source, and the settings it was opened with (their ``retrieval`` part is the default)."""

    settings: Settings

    def dependencies(self, tool_id: str, kinds: Sequence[EdgeKind] | None = None) -> list[DependencyEdge]: ...

    def source_of(self, tool_id: str) -> str | None: ...


def first_pass(
    queries: Sequence[QueryVariant],
    index: SearchIndex,
    method: RetrievalMethod,
    k: int,
    *,
    exclude_sources: Collection[str] = (),
    name_match: float = 0.0,
    calibrated: bool = False,
    text_weight: float = 1.0,
) -> list[list[Hit]]:
    """Top ``k`` tools for each query variant by one retriever, or by both fused (``hybrid`` / ``grtf``:
    z-scores, BM25's weighed ``text_weight`` against the vectors' 1, or by the index's ``fleet_calibration``
    when ``calibrated``) and, with
    ``name_match`` > 0, lifted by how much of each name the query spells out."""
    passes = scored_first_pass(
        queries, index, method, k, exclude_sources, name_match, calibrated, text_weight
    )
    return [hits[:k] for hits, _ in passes]


def scored_first_pass(
    queries: Sequence[QueryVariant],
    index: SearchIndex,
    method: RetrievalMethod,
    k: int,
    exclude_sources: Collection[str],
    name_match: float,
    calibrated: bool = False,
    text_weight: float = 1.0,
) -> list[tuple[list[Hit], dict[str, float]]]:
    """Ranked candidates (at least ``_MIN_POOL`` when fused) and each one's cosine similarity, if known."""
    if method in ("vector", "bm25"):
        use_vector = method == "vector"
        scope = SearchScope(frozenset(exclude_sources), vector=use_vector, text=not use_vector)
        both = index.search(queries, k, scope)
        return [
            (vector, {h.tool_id: h.score for h in vector}) if use_vector else (text, {})
            for vector, text in both
        ]
    both = index.search(queries, max(k, _MIN_POOL), SearchScope(frozenset(exclude_sources)))
    # a fixed weight unless asked: with toolret-v2 the probe calibration ranked worse than none on every
    # dataset measured (bench/RESULTS.md, "Retrieval quality"); the snapshot's, once per snapshot
    calibration = fleet_calibration(index) if calibrated else fixed_weight(text_weight)
    vocabulary = index.name_vocabulary() if name_match > 0 else None
    passes = []
    for query, (vector, text) in zip(queries, both, strict=True):
        fused = fuse(vector, text, calibration)
        if vocabulary is not None:  # the query text alone, as BM25 reads it
            fused = match_names(fused, query[0], vocabulary, name_match)
        passes.append((fused, {h.tool_id: h.score for h in vector}))
    return passes


def fleet_calibration(index: SearchIndex) -> FleetCalibration:
    """How sure each retriever is on the fleet ``index`` holds: both retrievers' peaks over probe
    searches of the fleet's own tool descriptions (as deep as a fused first pass), once per snapshot."""

    def probe(texts: Sequence[str]) -> FleetCalibration:
        return calibrate(index.search([(t,) for t in texts], _MIN_POOL) if texts else [])

    return index.calibration("fleet", probe)


def retrieve(
    query: str,
    index: SearchIndex,
    dependencies: DependencyLookup,
    params: RetrievalSettings,
    *,
    exclude_sources: Collection[str] = frozenset(),
    context: Sequence[str] = (),
    source_of: Callable[[str], str | None] | None = None,
    decomposition: Decomposition | None = None,
    signed_in: Collection[str] = frozenset(),
) -> list[RankedTool]:
    """The ranked tools for ``query``: first-pass hits, and for ``grtf`` their dependencies.

    Args:
        query: the user's request (or the model's paraphrase of it).
        index: searches tools (vector and full text).
        dependencies: ``(tool_id, kinds) -> edges`` of the dependency graph.
        params: method, k (``top_k``), K (``final_k``), ``d_limit``, edge kinds, floor, decomposition.
        exclude_sources: sources whose tools must not be returned (e.g. a disconnected upstream).
        context: earlier requests of the same conversation, oldest first.
        source_of: tool id → source, needed to keep excluded sources out of dependency walks.
        decomposition: split a multi-part request into sub-queries, searched beside the whole query
            (one batched search) and fused into one candidate list; None = as ``params.decompose`` says
            (``decomposition_of``).
        signed_in: sources whose credential the session holds (``credentials.signs_in``): no inferred
            login is walked from their tools (needs ``source_of``).
    """
    text = clean_query(query)
    if not text:
        raise RetrievalError("the query is empty")
    if params.final_k < 1 or params.top_k < 1:
        raise RetrievalError("top_k and final_k must be at least 1")
    pool = max(params.final_k, params.top_k)
    decomposition = decomposition or decomposition_of(params)
    hits, cosine = candidates(text, context, index, params, pool, exclude_sources, decomposition)
    relevance = turn_relevance(hits)
    kept = apply_floor(
        hits,
        cosine,
        relative=params.floor_relative,
        absolute=params.floor_absolute,
        destructive_extra=params.floor_destructive,
        is_destructive=index.is_destructive,
        relevance=relevance,
    )
    if params.method == "grtf" and any(holds_credential(t) for t in (text, *context)):
        dependencies = _filtered(dependencies, without_credentials)  # logged in already: no login walked
    elif params.method == "grtf" and signed_in and source_of is not None:
        dependencies = _filtered(dependencies, signed_in_filter(signed_in, source_of))
    ranked = _ranked(hits, dependencies, params, relevance, exclude_sources, source_of)
    return mark_published(ranked, kept)


def _filtered(
    dependencies: DependencyLookup, keep: Callable[[Sequence[DependencyEdge]], list[DependencyEdge]]
) -> DependencyLookup:
    def lookup(tool_id: str, kinds: Sequence[EdgeKind] | None) -> Sequence[DependencyEdge]:
        return keep(dependencies(tool_id, kinds))

    return lookup


def decomposition_of(params: RetrievalSettings) -> Decomposition | None:
    """The decomposition ``params.decompose`` asks for (None for ``off``, and for ``bm25``: the parts'
    weights read the vector side's cosine, which BM25 alone does not have)."""
    if params.decompose == "off" or params.method == "bm25":
        return None
    return Decomposition(level=params.decompose)


def candidates(
    text: str,
    context: Sequence[str],
    index: SearchIndex,
    params: RetrievalSettings,
    pool: int,
    exclude_sources: Collection[str],
    decomposition: Decomposition | None,
) -> tuple[list[Hit], dict[str, float]]:
    """The first pass of the whole query, or of it and its parts fused: ranked candidates and each
    one's best cosine similarity over the variants."""
    texts = [text] if decomposition is None else decomposition.split(text)
    variants = [contextual_query(t, context) for t in texts]
    passes = scored_first_pass(
        variants,
        index,
        params.method,
        pool,
        exclude_sources,
        params.name_match,
        params.fleet_calibration,
        params.text_weight,
    )
    if decomposition is None or len(passes) == 1:
        return passes[0]
    depth = max(len(hits) for hits, _ in passes)  # as deep as one variant's list: the floor's scale
    hits = decomposition.fuse(passes, depth)
    cosine: dict[str, float] = {}
    for _, part_cosine in passes:
        for tool_id, score in part_cosine.items():
            cosine[tool_id] = max(score, cosine.get(tool_id, score))
    return hits, cosine


def _ranked(
    hits: list[Hit],
    dependencies: DependencyLookup,
    params: RetrievalSettings,
    relevance: dict[str, float],
    exclude_sources: Collection[str],
    source_of: Callable[[str], str | None] | None,
) -> list[RankedTool]:
    if params.method != "grtf":
        return [
            RankedTool(h.tool_id, n, "first_pass", h.score) for n, h in enumerate(hits[: params.final_k], 1)
        ]

    kinds = tuple(params.edge_kinds)
    keep = None
    if exclude_sources and source_of is not None:
        excluded = frozenset(exclude_sources)

        def keep(tool_id: str) -> bool:
            return source_of(tool_id) not in excluded

    return expand_with_dependencies(
        hits,
        dependencies,
        top_k=params.top_k,
        final_k=params.final_k,
        d_limit=params.d_limit,
        edge_kinds=kinds,
        keep=keep,
        relevance=relevance,
    )


def retrieve_tools(
    index: ToolIndex,
    query: str,
    params: RetrievalSettings | None = None,
    *,
    exclude_sources: Collection[str] = (),
    context: Sequence[str] = (),
    signed_in: Collection[str] = frozenset(),
) -> list[RankedTool]:
    """Graph RAG-Tool Fusion over a registry: ``retrieve`` with the registry's own dependency look-up,
    sources and (when ``params`` is None) retrieval settings."""
    return retrieve(
        query,
        index,
        index.dependencies,
        params or index.settings.retrieval,
        exclude_sources=frozenset(exclude_sources),
        context=context,
        source_of=index.source_of,
        signed_in=frozenset(signed_in),
    )
