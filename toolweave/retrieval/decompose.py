"""Query decomposition and rank fusion for requests that need several tools (Toolshed's idea, no LLM).

"Find the weather in Paris and then book a table for two" embeds as one blurred vector between two
tools; searched as its parts, each part finds its own tool. The gateway has no model to rewrite
queries, so ``decompose_query`` is a cheap heuristic: it cuts at sentence boundaries and at clause
coordinators (", and ", " and then ", " also ", "Additionally," ...), and only where every part keeps
enough content words to be a request of its own (a false split of a single request is the risk: "a
course that covers Python and Java" must stay whole). The whole query is always the first variant.
``fuse_max`` merges the per-variant first-pass lists into one candidate list (each tool's best
relevance over the lists). ``part_weights`` weighs each part's list by how strongly its leader matches
compared with the whole query's: a sentence that asks for nothing ("It is a multistep process that
requires multiple API calls") finds no tool as well as the whole request does, so its leader cannot rise
above the request's own first hits. Pure text and list functions.

``Decomposition`` is the seam: ``retrieve`` calls its ``split`` and ``fuse``. The alternatives the lab
measured and did not ship (reciprocal-rank and round-robin fusion, other part weightings) subclass it in
``bench/labs/decompose_variants.py``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from toolweave.retrieval.fusion import turn_relevance
from toolweave.retrieval.results import Hit

__all__ = [
    "MAX_PARTS",
    "MIN_CONTENT_WORDS",
    "Decomposition",
    "Pass",
    "SplitLevel",
    "decompose_query",
    "fuse_max",
    "part_weights",
]

SplitLevel = Literal["sentences", "clauses", "and"]
"""Where ``decompose_query`` may cut: sentence boundaries and "; " only; also clause coordinators;
also a bare " and " (the riskiest: "restaurants and career opportunities", but "Python and Java")."""

Pass = tuple[Sequence[Hit], Mapping[str, float]]
"""One variant's first pass: its ranked hits and each hit's cosine similarity (vector side only)."""

MIN_CONTENT_WORDS = 4
"""A part must hold at least this many content words (not filler like "can you tell me"); chosen with
the weighting leave-one-dataset-out (bench/HISTORY.md, "Query decomposition that does no harm")."""

MAX_PARTS = 4
"""At most this many sub-queries (each is one more variant to embed and search)."""

_SENTENCE = r"(?<=[.?!])\s+(?=[\"'(]?[A-Z])|;\s+"
_CLAUSE = (
    r",?\s+and\s+then\s+|,?\s+then\s+|,\s+and\s+also\s+|\s+and\s+also\s+|,?\s+as\s+well\s+as\s+"
    r"|,\s+and\s+|,\s+also\s+|\s+also\s+|,?\s+additionally,?\s+|,\s+plus\s+"
)
_AND = r"\s+and\s+"
# At the ``clauses`` and ``and`` levels the whole pattern ignores case, so there a sentence may also start
# lower-case after ". " (as measured; "sentences" asks for a capital).
_CUTS: dict[SplitLevel, re.Pattern[str]] = {
    "sentences": re.compile(_SENTENCE),
    "clauses": re.compile(f"{_SENTENCE}|{_CLAUSE}", re.IGNORECASE),
    "and": re.compile(f"{_SENTENCE}|{_CLAUSE}|{_AND}", re.IGNORECASE),
}
# Connectors and quotes a part keeps at its edges after a cut: they say nothing about the tool.
_LEADING = re.compile(
    r"^(?:[\"'(\s]|(?:and|then|also|additionally|finally|furthermore|moreover|plus|lastly|next|after that)"
    r"\b[,\s]*)+",
    re.IGNORECASE,
)
_TRAILING = re.compile(r"[\s,;:.?!\"')]+$")
_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9'&_-]*")
_FILLER = frozenset(
    # one string: a word list is easier to read and extend than 75 quoted lines
    "a an the and or but so to of in on for with at by from about into as is are was were be been am do "  # noqa: SIM905
    "does did can could would will shall should may might must i me my we our us you your it its this "
    "that these those there here what which who whom how when where why please tell give show let help "
    "want need like also then any some".split()
)


def _content_words(text: str) -> int:
    return sum(1 for w in _WORD.findall(text) if w.lower() not in _FILLER)


def _tidy(part: str) -> str:
    return _TRAILING.sub("", _LEADING.sub("", part)).strip()


def decompose_query(
    query: str,
    *,
    level: SplitLevel = "sentences",
    min_content_words: int = MIN_CONTENT_WORDS,
    max_parts: int = MAX_PARTS,
) -> list[str]:
    """``[query, *parts]``: the whole (cleaned) query first, then its sub-requests if it splits into at
    least two, else ``[query]`` alone.

    Cuts are taken left to right; a cut is kept only when the part before it (since the last kept cut)
    and everything after it each hold ``min_content_words`` content words, so a short clause stays
    joined to its neighbour instead of becoming a query of its own.
    """
    query = query.strip()
    parts: list[str] = []
    start = 0
    for cut in _CUTS[level].finditer(query):
        if len(parts) == max_parts - 1:
            break
        head, rest = query[start : cut.start()], query[cut.end() :]
        if _content_words(head) >= min_content_words and _content_words(rest) >= min_content_words:
            parts.append(_tidy(head))
            start = cut.end()
    if not parts:
        return [query]
    parts.append(_tidy(query[start:]))
    unique = [p for p in dict.fromkeys(parts) if p and p != query]
    return [query, *unique] if len(unique) >= 2 else [query]


def part_weights(confidences: Sequence[float | None]) -> list[float]:
    """Each variant's weight in ``fuse_max``: 1 for the whole query (``confidences[0]``); for a part,
    ``min(1, its confidence / the whole query's)``.

    A confidence is the best cosine similarity of the variant's vector hits: the same model and tools for
    every variant, so it compares parts with the whole in absolute terms. A part that matches as well as
    the whole request, or better, keeps weight 1 (its leader may take the top: the whole request's single
    vector blurred it); one that matches less can only add tools below the whole query's best. Without
    evidence on either side (None, or a whole query at or below 0) a part weighs 1.
    """
    if not confidences:
        return []
    whole = confidences[0]
    weights = [1.0]
    for part in confidences[1:]:
        if whole is None or part is None or whole <= 1e-12:
            weights.append(1.0)
        else:
            weights.append(min(1.0, max(part, 0.0) / whole))
    return weights


def fuse_max(lists: Sequence[Sequence[Hit]], k: int, weights: Sequence[float] | None = None) -> list[Hit]:
    """The first ``k`` of one candidate list made from the whole query's list (``lists[0]``) and its
    parts' lists: each list's scores mapped onto [0, 1] within the list (best 1, weakest 0), times the
    list's weight in ``weights`` (``part_weights``; None = 1 each), and a tool's best over the lists
    (below 1, a part's leader outranks only the whole query's weaker hits: a false split of a single
    request moves little). Ties keep the order a tool was first seen in. A single list is returned as it is.
    """
    if len(lists) == 1:
        return list(lists[0][:k])
    order: dict[str, int] = {}
    for hits in lists:
        for h in hits:
            order.setdefault(h.tool_id, len(order))
    fused: dict[str, float] = {}
    for n, hits in enumerate(lists):
        weight = 1.0 if weights is None else weights[n]
        for tool_id, relevance in turn_relevance(hits).items():
            fused[tool_id] = max(fused.get(tool_id, 0.0), weight * relevance)
    ranked = sorted(fused.items(), key=lambda kv: (-kv[1], order[kv[0]]))
    return [Hit(i, s) for i, s in ranked[:k]]


@dataclass(frozen=True)
class Decomposition:
    """How ``retrieve`` splits a request (``split``) and fuses the variants' lists (``fuse``).

    The gateway's: ``retrieval.decompose`` picks the level; each part's list is weighted by its
    confidence against the whole query's (``part_weights``), so a sentence that asks for nothing matches
    every tool worse than the request does and cannot bring its best match to the top. Unweighted,
    decomposition cost OpenAPI-links' workflow descriptions 0.014 / 0.028 mAP@10 (bench/HISTORY.md,
    "Query decomposition that does no harm")."""

    level: SplitLevel = "sentences"
    min_content_words: int = MIN_CONTENT_WORDS
    max_parts: int = MAX_PARTS

    def split(self, query: str) -> list[str]:
        """``decompose_query`` with these options: the whole query first, then its parts, if any."""
        return decompose_query(
            query, level=self.level, min_content_words=self.min_content_words, max_parts=self.max_parts
        )

    def fuse(self, passes: Sequence[Pass], k: int) -> list[Hit]:
        """The first ``k`` of one candidate list from the variants' first passes (the whole query's
        first, as ``split`` ordered them)."""
        weights = part_weights([max(cosine.values(), default=None) for _, cosine in passes])
        return fuse_max([hits for hits, _ in passes], k, weights)
