"""Name match: a fused candidate whose name the request spells out moves up.

Vectors blur a request into one meaning and BM25 counts words over a whole document, where a tool's
name is a few words among many. Yet the name is what its author chose to say what the tool does, and a
request that names it ("log me in to Delta", "find pets by tags") is rarely about another tool. So
after fusion each candidate gains ``weight × match × spread``: ``match`` is the share of its name, each
term weighed by how rare it is among the fleet's names (``NameVocabulary``: ``get`` counts little,
``delta`` much), that the request spells out; ``spread`` is the fused scores' standard deviation over
the candidates, so the weight means the same whatever the fusion's scale. No constant is set per
fleet: the rarity comes from the fleet's own names, and the weight (1) was chosen leave-one-dataset-out
(bench/HISTORY.md, "Name match").
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from toolweave.names import NameVocabulary, text_terms
from toolweave.records import Hit
from toolweave.retrieval.fusion import mean_and_spread

__all__ = ["match_names"]


def match_names(hits: Sequence[Hit], request: str, vocabulary: NameVocabulary, weight: float) -> list[Hit]:
    """``hits`` (fused, best first) re-scored by how much of each tool's name ``request`` spells out,
    best first again; unchanged when ``weight`` is 0 or the scores do not spread (all tied, or not all
    finite)."""
    if weight <= 0 or len(hits) < 2:
        return list(hits)
    scores = [h.score for h in hits]
    if not all(map(math.isfinite, scores)):
        return list(hits)  # no spread to measure the lift in: adding NaN or inf would taint every score
    try:
        _mean, spread = mean_and_spread(scores)
    except OverflowError:  # scores near float's limit: no unit either
        return list(hits)
    if spread <= 1e-12 or not math.isfinite(spread):
        return list(hits)
    terms = text_terms(request)
    scored = [Hit(h.tool_id, h.score + weight * spread * vocabulary.match(terms, h.tool_id)) for h in hits]
    return sorted(scored, key=lambda h: -h.score)  # stable: ties keep the fused order
