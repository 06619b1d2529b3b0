"""Query handling before the first pass: clean-up and conversation context. Pure text functions."""

from __future__ import annotations

import re
from collections.abc import Sequence

__all__ = ["CONTEXT_WEIGHT", "QueryVariant", "clean_query", "contextual_query"]

QueryVariant = tuple[str, ...]
"""A query text, optionally followed by context texts (earlier requests of the conversation)."""

CONTEXT_WEIGHT = 0.5
"""Weight of a context text's vector in a variant's composed vector (the query itself weighs 1)."""

_SPACE = re.compile(r"\s+")
_MAX_QUERY_CHARS = 2000


def clean_query(query: str) -> str:
    """Collapse whitespace and bound the length (a pasted document is not a tool query)."""
    return _SPACE.sub(" ", query).strip()[:_MAX_QUERY_CHARS]


def contextual_query(query: str, context: Sequence[str], *, max_context: int = 1) -> QueryVariant:
    """``query`` with the conversation's most recent other request(s) after it.

    A follow-up such as "and for Apple?" only makes sense with the previous request. The index
    composes the variant's vector as ``v(query) + CONTEXT_WEIGHT * v(previous)``: a specific query
    dominates its own vector and keeps the search on the new topic, while a vague follow-up borrows
    the previous request's meaning. The previous vector is usually cached: no extra model run.
    """
    recent = [c for c in (clean_query(c) for c in reversed(context)) if c and c != query][:max_context]
    return (query, *recent)
