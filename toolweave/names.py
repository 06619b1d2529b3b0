"""Tool names as words: what a tool's document shows, and what a request's words are matched against.

A tool's name is the most deliberate text it has (``get_stock_price``, ``findPetsByTags``): its author
picked those few words to say what it does. The registry counts, over a fleet's names, how many hold
each term (``NameVocabulary``); retrieval (``toolweave.retrieval.name_match``) then lifts a candidate
by how much of its name, weighed by rarity, the request spells out. Both sides cut words the same way
here, at the package root, because the registry never imports retrieval.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from types import MappingProxyType

__all__ = ["NameVocabulary", "camel_spaced", "name_of", "name_terms", "name_words", "stem", "text_terms"]

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_SEPARATORS = re.compile(r"[_\-.:/\s]+")
_WORD = re.compile(r"[^\W_]+")  # letters and digits of any script: "météo" stays one word
_SUFFIXES = ("ing", "es", "ed", "s")
_ID_SEPARATOR = "__"  # ToolRecord.id is ``<source>__<name>``


def camel_spaced(text: str) -> str:
    """``getStockPrice`` → ``get Stock Price`` (``HTTPServer`` → ``HTTP Server``): a space at each camelCase
    boundary, the one rule every part that reads names as words cuts them by."""
    return _CAMEL.sub(" ", text)


def name_words(name: str) -> str:
    """``get_stockPrice`` → ``get stock price``: names carry meaning embedders only see as words."""
    return " ".join(w.lower() for w in _SEPARATORS.split(camel_spaced(name)) if w)


def _stem(word: str) -> str:
    # crude on purpose: it only has to make "orders" meet "order" and "booking" meet "book", the same way
    # on both sides; a word keeps at least four letters, so "news" and "bus" stay whole
    for suffix in _SUFFIXES:
        if len(word) > len(suffix) + 3 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def stem(word: str) -> str:
    """``word`` (lower case) without its common English suffix: what the name match compares."""
    return _stem(word)


def name_terms(name: str) -> frozenset[str]:
    """The stemmed words of a tool name (camelCase and separators split)."""
    # ``name_words`` without its join: every separator is a non-word character (or ``_``) to ``_WORD``
    return frozenset(_stem(w) for w in _WORD.findall(camel_spaced(name).lower()))


@lru_cache(maxsize=8192)
def _candidate_terms(tool_id: str) -> frozenset[str]:
    # a search matches the same few thousand candidates again and again; counting a fleet does not
    # come through here (100k names would only churn the cache)
    return name_terms(name_of(tool_id))


def text_terms(text: str) -> frozenset[str]:
    """The stemmed words of a request, cut as ``name_terms`` cuts names."""
    return frozenset(_stem(w) for w in _WORD.findall(text.lower()))


def name_of(tool_id: str) -> str:
    """The name part of a tool id (``<source>__<name>``); the id itself when it has no source part."""
    return tool_id.partition(_ID_SEPARATOR)[2] or tool_id


@dataclass(frozen=True)
class NameVocabulary:
    """How many of a fleet's tool names hold each term: a term most names share (``get``) says little
    about which tool a request wants, a rare one (``spotify``, ``invoice``) says much."""

    counts: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))
    size: int = 0
    renamed: Mapping[str, frozenset[str]] = field(default_factory=lambda: MappingProxyType({}))
    """Terms of the tools whose own name cuts otherwise than their id's name part, by id (usually
    none). An id is sanitised to ``[A-Za-z0-9_-]`` and cut to 64 characters with a hash
    (``make_tool_id``): ``获取天气`` becomes ``<source>__tool``, which a request saying "tool" would
    spell out whole, and a long name ends in a hash no request spells."""
    _weights: dict[str, float] = field(default_factory=dict, compare=False, repr=False)
    """``weight`` by term, filled as searches ask (a lost race only computes a weight twice)."""
    _weighed: dict[str, tuple[tuple[tuple[str, float], ...], float]] = field(
        default_factory=dict, compare=False, repr=False
    )
    """Each matched tool's name terms with their weights, and the weights' sum, filled as searches ask:
    a search matches the same candidates again and again, and a write makes a new vocabulary (so
    nothing here outlives the counts it was computed from)."""

    @classmethod
    def of(cls, tool_ids: Iterable[str], names: Mapping[str, str] | None = None) -> NameVocabulary:
        """The vocabulary of the tools ``tool_ids`` name (``names``: id → the tool's own name, where
        known; otherwise its id's name part counts)."""
        return cls().changed(removed=(), added=tool_ids, names=names)

    def changed(
        self, removed: Iterable[str], added: Iterable[str], names: Mapping[str, str] | None = None
    ) -> NameVocabulary:
        """This vocabulary after the tools ``removed`` left and ``added`` joined (ids; ``names`` as in
        ``of``): a write costs what it changed, not the fleet (100k names take ~0.5 s to count)."""
        counts = Counter(self.counts)
        renamed = dict(self.renamed)
        size = self.size
        for tool_id in removed:
            gone = renamed.pop(tool_id, None)  # its own name's terms may be none at all
            counts.subtract(name_terms(name_of(tool_id)) if gone is None else gone)
            size -= 1
        for tool_id in added:
            part = name_of(tool_id)
            terms = name_terms(part)
            own = names.get(tool_id, part) if names is not None else part
            if own != part and name_terms(own) != terms:  # a string compare for nearly every tool
                terms = renamed[tool_id] = name_terms(own)
            counts.update(terms)
            size += 1
        kept = {t: n for t, n in counts.items() if n > 0}
        return NameVocabulary(MappingProxyType(kept), size, MappingProxyType(renamed))

    def following(
        self, before: Collection[str], after: Collection[str], names: Mapping[str, str] | None = None
    ) -> NameVocabulary:
        """This vocabulary (of the ids ``before``) for the ids ``after`` (``names`` as in ``of``)."""
        if not before:
            return NameVocabulary.of(after, names)
        old, new = set(before), set(after)
        return self.changed(removed=old - new, added=new - old, names=names)

    def terms_of(self, tool_id: str) -> frozenset[str]:
        """The terms of ``tool_id``'s name, as counted."""
        found = self.renamed.get(tool_id)
        return _candidate_terms(tool_id) if found is None else found

    def weight(self, term: str) -> float:
        """Inverse document frequency of ``term`` over the names (a term no name holds weighs most)."""
        found = self._weights.get(term)
        if found is None:
            found = self._weights[term] = math.log(1.0 + self.size / max(self.counts.get(term, 0), 1))
        return found

    def match(self, request: Collection[str], tool_id: str) -> float:
        """Share of ``tool_id``'s name, each term weighed by ``weight``, that the ``request``'s terms
        (``text_terms``) spell out: 0 (none) to 1 (every word of the name)."""
        weighed = self._weighed.get(tool_id)
        if weighed is None:
            pairs = tuple((t, self.weight(t)) for t in self.terms_of(tool_id))
            weighed = self._weighed[tool_id] = (pairs, sum(w for _, w in pairs))
        pairs, total = weighed
        return sum(w for t, w in pairs if t in request) / total if total > 0 else 0.0
