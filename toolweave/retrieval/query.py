"""Query handling before the first pass: clean-up and conversation context. Pure text functions."""

from __future__ import annotations

import re
from collections.abc import Sequence

__all__ = ["clean_query", "contextual_queries"]

_SPACE = re.compile(r"\s+")
_MAX_QUERY_CHARS = 2000


def clean_query(query: str) -> str:
    """Collapse whitespace and bound the length (a pasted document is not a tool query)."""
    return _SPACE.sub(" ", query).strip()[:_MAX_QUERY_CHARS]


def contextual_queries(query: str, context: Sequence[str], *, max_context: int = 1) -> list[str]:
    """Rewrites of ``query`` that carry the conversation, most recent context first.

    A follow-up such as "and convert it to euros" only makes sense with the previous request, so
    the first pass also searches ``"<query> <previous request>"`` and fuses the rankings, with
    the bare query weighted highest.
    """
    recent = [c for c in (clean_query(c) for c in reversed(context)) if c and c != query][:max_context]
    return [f"{query} {c}" for c in recent]
