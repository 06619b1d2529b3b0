"""Words out of tool names, parameter names and descriptions, for the inference rules.

Everything here is generic English and API naming convention (camelCase, snake_case, verb-object
tool names, ``*_id`` / ``*_code`` identifiers); nothing names a tool or a benchmark.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache

from toolweave.names import camel_spaced

__all__ = [
    "AMBIENT_QUALIFIERS",
    "PRODUCER_VERBS",
    "singular",
    "split_verb",
    "words",
    "wordset",
]


def wordset(text: str) -> frozenset[str]:
    """A vocabulary written as one space-separated string (easier to read and diff than a list)."""
    return frozenset(text.split())


_NON_WORD = re.compile(r"[^A-Za-z0-9]+")

PRODUCER_VERBS = wordset(
    "get fetch retrieve read lookup look find search list query generate create make calculate compute "
    "estimate validate check verify login log sign authenticate auth obtain request issue convert scan "
    "detect resolve show view return provide determine identify locate register new add set"
)
"""Verbs that start a tool name; the rest of the name is the thing the tool is about."""

AMBIENT_QUALIFIERS = wordset("current system device user my local today now default")
"""Qualifiers of ambient state: ``get_current_location`` is about a location, the one in effect now."""


def words(text: str) -> list[str]:
    """``get_stockPrice-v2`` → ``["get", "stock", "price", "v2"]`` (lower case)."""
    # Profiling 100k tools splits a few million names, most of them seen before (parameter names,
    # verbs): cached, the first ingest into a large registry profiles far faster. Descriptions are
    # split too, each once: caching them would hold ~200 MB at 100k tools and push the names out.
    return list(_cached_words(text) if len(text) <= _CACHED_LENGTH else _words(text))


_CACHED_LENGTH = 64


def _words(text: str) -> tuple[str, ...]:
    spaced = camel_spaced(text)
    return tuple(w.lower() for w in _NON_WORD.split(spaced) if w)


_cached_words = lru_cache(maxsize=1 << 16)(_words)


@lru_cache(maxsize=1 << 16)
def singular(word: str) -> str:
    """A light English singular: enough to match ``appointments`` with ``appointment_id``."""
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 4 and word.endswith(("sses", "ches", "shes", "xes")):
        return word[:-2]
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def split_verb(name_words: Iterable[str]) -> tuple[str, list[str]]:
    """Split a verb-object tool name: ``get country code`` → (``get``, [``country``, ``code``])."""
    ws = list(name_words)
    if ws and ws[0] in PRODUCER_VERBS:
        return ws[0], ws[1:]
    return "", ws
