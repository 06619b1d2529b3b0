"""Query decomposition and rank fusion for requests that need several tools (Toolshed's idea, no LLM).

"Find the weather in Paris and then book a table for two" embeds as one blurred vector between two
tools; searched as its parts, each part finds its own tool. The gateway has no model to rewrite
queries, so ``decompose_query`` is a cheap heuristic: it cuts at sentence boundaries and at clause
coordinators (", and ", " and then ", " also ", "Additionally," ...), and only where every part keeps
enough content words to be a request of its own (a false split of a single request is the risk: "a
course that covers Python and Java" must stay whole). The whole query is always the first variant.
``fuse_variants`` merges the per-variant first-pass lists into one candidate list (reciprocal rank,
round-robin from the whole query's list, or the best per-list relevance). ``part_weights`` weighs each
part's list by how strongly its leader matches compared with the whole query's (``max`` fusion): a
sentence that asks for nothing ("It is a multistep process that requires multiple API calls") finds no
tool as well as the whole request does, so its leader cannot rise above the request's own first hits.
Pure text and list functions.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from statistics import median
from typing import Any, Literal

from toolweave.retrieval.fusion import RRF_K, turn_relevance
from toolweave.retrieval.results import Hit

__all__ = [
    "MAX_PARTS",
    "MIN_CONTENT_WORDS",
    "Decomposition",
    "PartWeighting",
    "SplitLevel",
    "VariantFusion",
    "decompose_query",
    "fuse_variants",
    "list_confidence",
    "part_weights",
]

SplitLevel = Literal["sentences", "clauses", "and"]
"""Where ``decompose_query`` may cut: sentence boundaries and "; " only; also clause coordinators;
also a bare " and " (the riskiest: "restaurants and career opportunities", but "Python and Java")."""

VariantFusion = Literal["rrf", "interleave", "max"]

PartWeighting = Literal["flat", "cosine", "gap"]
"""How ``max`` fusion weighs a part's list against the whole query's (``part_weights``): ``flat`` = all
alike; ``cosine`` = by its best cosine similarity (how well its leader matches in absolute terms);
``gap`` = by how far its leader stands above the median of its own fused list (how sure it is)."""

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


def list_confidence(hits: Sequence[Hit], cosine: Mapping[str, float], how: PartWeighting) -> float | None:
    """How strongly one variant's first pass found something, on a scale shared by every variant of the
    turn (None = no evidence: ``flat``, or no vector side for ``cosine``, or fewer than two distinct scores
    for ``gap``).

    ``cosine``: the best cosine similarity of the variant's vector hits; the same model and tools for
    every variant, so it compares parts with the whole in absolute terms. ``gap``: ``(best - median) /
    (best - worst)`` of the fused scores, in [0, 1]: a leader far above a list that is otherwise flat is
    a confident one; a leader barely above the median (a vague text matching many tools a little) is not.
    """
    if how == "cosine":
        return max(cosine.values(), default=None)
    if how == "gap":
        scores = [h.score for h in hits]
        if len(scores) < 2 or max(scores) - min(scores) <= 1e-12:
            return None
        best = max(scores)
        return (best - median(scores)) / (best - min(scores))
    return None


def part_weights(confidences: Sequence[float | None], power: float = 1.0) -> list[float]:
    """Each variant's weight for ``max`` fusion: 1 for the whole query (``confidences[0]``); for a part,
    ``min(1, its confidence / the whole query's) ** power``.

    A part that matches as well as the whole request, or better, keeps weight 1 (its leader may take the
    top: the whole request's single vector blurred it); one that matches less can only add tools below
    the whole query's best. Without evidence on either side (None, or a whole query at or below 0) a
    part weighs 1, as with ``flat``.
    """
    if not confidences:
        return []
    whole = confidences[0]
    weights = [1.0]
    for part in confidences[1:]:
        if whole is None or part is None or whole <= 1e-12:
            weights.append(1.0)
        else:
            weights.append(min(1.0, max(part, 0.0) / whole) ** power)
    return weights


def fuse_variants(
    lists: Sequence[Sequence[Hit]],
    method: VariantFusion,
    k: int,
    part_weight: float = 1.0,
    weights: Sequence[float] | None = None,
) -> list[Hit]:
    """The first ``k`` of one candidate list made from the whole query's list (``lists[0]``) and its
    parts' lists.

    ``rrf``: ``sum 1 / (RRF_K + rank)`` over the lists (a tool several parts find rises; the whole
    query's list counts as one of them). ``interleave``: round robin, the whole query's list first, each
    tool once (every part gets its best tools near the top, whatever the score scales). ``max``: each
    list's scores mapped onto [0, 1] within the list (best 1, weakest 0) and the parts' lists weighted
    ``part_weight``, times the list's own weight in ``weights`` (``part_weights``; None = 1 each), a
    tool's best over the lists (below 1, a part's leader outranks only the whole query's weaker hits: a
    false split of a single request moves little). A single list is returned as it is.
    """
    if len(lists) == 1:
        return list(lists[0][:k])
    order: dict[str, int] = {}  # tie-break: first seen, in list order
    for hits in lists:
        for h in hits:
            order.setdefault(h.tool_id, len(order))
    fused: dict[str, float] = {}
    if method == "rrf":
        for hits in lists:
            for rank, h in enumerate(hits, 1):
                fused[h.tool_id] = fused.get(h.tool_id, 0.0) + 1.0 / (RRF_K + rank)
    elif method == "interleave":
        longest = max(len(hits) for hits in lists)
        for rank in range(longest):
            for hits in lists:
                if rank < len(hits) and hits[rank].tool_id not in fused:
                    # scores fall with the position: the relevance floor and the walk read an order
                    fused[hits[rank].tool_id] = 1.0 / (RRF_K + len(fused) + 1)
    else:
        for n, hits in enumerate(lists):
            weight = (1.0 if n == 0 else part_weight) * (1.0 if weights is None else weights[n])
            for tool_id, relevance in turn_relevance(hits).items():
                fused[tool_id] = max(fused.get(tool_id, 0.0), weight * relevance)
    ranked = sorted(fused.items(), key=lambda kv: (-kv[1], order[kv[0]]))
    return [Hit(i, s) for i, s in ranked[:k]]


@dataclass(frozen=True)
class Decomposition:
    """How ``retrieve`` splits a request (``decompose_query``'s options) and fuses the variants' lists.

    The defaults are what the gateway uses (``retrieval.decompose`` picks the level); the other values
    are the alternatives the lab measured (``bench/ranking_lab.py decompose``)."""

    fusion: VariantFusion = "max"
    level: SplitLevel = "sentences"
    min_content_words: int = MIN_CONTENT_WORDS
    max_parts: int = MAX_PARTS
    part_weight: float = 1.0
    """``max`` fusion: the parts' relevance against the whole query's 1."""
    weighting: PartWeighting = "cosine"
    """``max`` fusion: each part's list also weighted by its confidence against the whole query's: a
    sentence that asks for nothing matches every tool worse than the request does and cannot bring its
    best match to the top. Unweighted (``flat``), decomposition cost OpenAPI-links' workflow
    descriptions 0.014 / 0.028 mAP@10 (bench/HISTORY.md, "Query decomposition that does no harm")."""
    weighting_power: float = 1.0
    """The power of that confidence ratio (``part_weights``)."""

    def split_options(self) -> dict[str, Any]:
        return {"level": self.level, "min_content_words": self.min_content_words, "max_parts": self.max_parts}
