"""Query handling before the first pass: clean-up and conversation context. Pure text functions."""

from __future__ import annotations

import re
from collections.abc import Sequence

from toolweave.records import CONTEXT_WEIGHT, QueryVariant  # shared with the registry, which composes vectors

__all__ = ["CONTEXT_WEIGHT", "MAX_CONTEXT", "QueryVariant", "clean_query", "contextual_query"]


MAX_CONTEXT = 4
"""Context texts (earlier requests, most recent first) that join a query."""

_SPACE = re.compile(r"\s+")
_MAX_QUERY_CHARS = 2000


def clean_query(query: str) -> str:
    """Collapse whitespace and bound the length (a pasted document is not a tool query)."""
    return _SPACE.sub(" ", query).strip()[:_MAX_QUERY_CHARS]


def contextual_query(query: str, context: Sequence[str], *, max_context: int = MAX_CONTEXT) -> QueryVariant:
    """``query`` with the conversation's most recent other requests after it, most recent first.

    A follow-up such as "and for Apple?" only makes sense with the previous request. The index
    composes the variant's vector as ``v(query) + w * v(previous) + w**2 * v(the one before) + ...``
    (``w = CONTEXT_WEIGHT``): a specific query dominates its own vector and keeps the search on the new
    topic, while a vague follow-up borrows the recent requests' meaning, the latest most. Context
    vectors are usually cached: no extra model run.
    """
    recent = [c for c in (clean_query(c) for c in reversed(context)) if c and c != query][:max_context]
    return (query, *recent)
