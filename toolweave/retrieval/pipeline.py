"""Graph RAG-Tool Fusion end to end, over any index that can search (pure: the index does the I/O).

query → clean / contextual rewrites → first pass (vector | bm25 | hybrid, fused over rewrites)
      → optional rerank → [grtf] depth-first walk of the top_k hits' dependencies → top final_k
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from typing import Protocol

from toolweave.errors import RetrievalError
from toolweave.retrieval.fusion import convex_fusion, reciprocal_rank_fusion
from toolweave.retrieval.query import clean_query, contextual_queries
from toolweave.retrieval.results import Hit, RankedTool
from toolweave.retrieval.walk import DependencyLookup, expand_with_dependencies
from toolweave.settings import RetrievalMethod, RetrievalSettings

__all__ = ["Reranker", "SearchIndex", "first_pass", "retrieve"]

Reranker = Callable[[str, list[Hit]], list[Hit]]
"""Hook: reorder first-pass hits (e.g. a cross-encoder or an LLM); must return a subset of them."""

_MIN_POOL = 30  # first-pass candidates per retriever before fusion: fusion needs overlap to work


class SearchIndex(Protocol):
    """What retrieval needs from a registry."""

    def vector_hits(self, query: str, k: int, exclude_sources: Collection[str] = ()) -> list[Hit]: ...

    def text_hits(self, query: str, k: int, exclude_sources: Collection[str] = ()) -> list[Hit]: ...

    def both_hits(
        self, queries: Sequence[str], k: int, exclude_sources: Collection[str] = ()
    ) -> list[tuple[list[Hit], list[Hit]]]:
        """``(vector hits, text hits)`` per query; an index may compute them all at once."""
        ...

    def find(self, tool_id: str) -> object | None: ...


def first_pass(
    queries: Sequence[str],
    index: SearchIndex,
    method: RetrievalMethod,
    k: int,
    *,
    alpha: float,
    exclude_sources: Collection[str] = (),
) -> list[list[Hit]]:
    """Top ``k`` tools for each query by one retriever, or by both fused (``hybrid`` / ``grtf``)."""
    if method == "vector":
        return [index.vector_hits(q, k, exclude_sources) for q in queries]
    if method == "bm25":
        return [index.text_hits(q, k, exclude_sources) for q in queries]
    both = index.both_hits(queries, max(k, _MIN_POOL), exclude_sources)
    return [convex_fusion(vector, text, alpha)[:k] for vector, text in both]


def retrieve(
    query: str,
    index: SearchIndex,
    dependencies: DependencyLookup,
    params: RetrievalSettings,
    *,
    exclude_sources: Collection[str] = frozenset(),
    context: Sequence[str] = (),
    rerank: Reranker | None = None,
    source_of: Callable[[str], str | None] | None = None,
) -> list[RankedTool]:
    """The ranked tools for ``query``: first-pass hits, and for ``grtf`` their dependencies.

    Args:
        query: the user's request (or the model's paraphrase of it).
        index: searches tools (vector and full text).
        dependencies: ``(tool_id, kinds) -> edges`` of the dependency graph.
        params: method, k (``top_k``), K (``final_k``), ``d_limit``, edge kinds, hybrid alpha.
        exclude_sources: sources whose tools must not be returned (e.g. a disconnected upstream).
        context: earlier requests of the same conversation, oldest first.
        rerank: optional hook applied to the first-pass candidates.
        source_of: tool id → source, needed to keep excluded sources out of dependency walks.
    """
    text = clean_query(query)
    if not text:
        raise RetrievalError("the query is empty")
    if params.final_k < 1 or params.top_k < 1:
        raise RetrievalError("top_k and final_k must be at least 1")
    pool = max(params.final_k, params.top_k)
    rewrites = contextual_queries(text, context)
    lists = first_pass(
        [text, *rewrites],
        index,
        params.method,
        pool,
        alpha=params.hybrid_alpha,
        exclude_sources=exclude_sources,
    )
    hits = lists[0]
    if rewrites:
        hits = reciprocal_rank_fusion(lists, [1.0] + [0.5] * len(rewrites))[:pool]
    if rerank is not None:
        hits = rerank(text, hits)
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
    )
