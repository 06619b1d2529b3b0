"""Parameter-value producer edges: an input of a typed kind comes from the tool that outputs that kind.

A reminder tool's ``remind_at`` is a timestamp; a tool whose output field is a ``timestamp`` (or a
``date-time`` field, or whose name says it gets one) is where that value comes from. Kinds are read
from generic naming conventions and JSON Schema ``format``s: timestamps, coordinates, emails, URLs
and file paths. Ids are left to ``identity_rule`` (an output field named like the input) and
``entity_id_rule``; tokens to ``auth_rule``.

Precision first: the producer's name must say it makes that kind, or both its output schema and a
"returns ..." phrase of its description must; a tool that takes the same kind as input transforms it
rather than produces it; and a kind that many tools produce equally well names no producer at all.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from toolweave.inference.producers import GENERIC_NAME_WORDS, ToolProfile
from toolweave.inference.rules.base import (
    EdgeText,
    Rule,
    Scope,
    best_candidate,
    is_sibling,
    param_words,
)
from toolweave.inference.text import AMBIENT_QUALIFIERS, wordset
from toolweave.inference.universe import group_by
from toolweave.records import DependencyEdge, EdgeKind

__all__ = ["VALUE_KINDS", "ValueKind", "param_kind", "producer_rule"]


@dataclass(frozen=True)
class ValueKind:
    name: str
    words: frozenset[str]
    """Head words of a parameter or output field holding this kind (``start_timestamp`` → timestamp)."""
    formats: frozenset[str]
    """JSON Schema ``format`` values of this kind."""
    producer_words: frozenset[str] = frozenset()
    """Words a producer's name or output must use, where ``words`` alone is ambiguous (a *path*)."""


VALUE_KINDS: tuple[ValueKind, ...] = (
    ValueKind("timestamp", wordset("timestamp datetime epoch"), wordset("date-time")),
    ValueKind(
        "coordinates",
        wordset("coordinates coordinate latitude longitude lat lon lng latlng latlon geolocation geocode"),
        frozenset(),
    ),
    ValueKind("email", wordset("email"), wordset("email idn-email")),
    ValueKind("url", wordset("url uri link href"), wordset("uri url iri uri-reference")),
    ValueKind("file path", wordset("path filepath filename"), frozenset(), wordset("file filepath filename")),
)

# words that say how a value is written, not whose it is (a unix timestamp is any timestamp)
_GENERIC = GENERIC_NAME_WORDS | AMBIENT_QUALIFIERS | wordset("unix utc iso iso8601 formatted epoch geo gps")
_HOLDER_SUFFIXES = ("address", "string", "value", "text", "str")
# a producer "returns ... a timestamp": the kind word within a few words of a giving verb, same sentence
_GIVES = r"\b(?:returns?|gives?|provides?|outputs?|generates?|produces?|yields?)\b[^.;:]{0,40}?\b"
_MAX_AMBIGUOUS = 2
"""More equally good producers than this: the kind names no producer."""


def _head(pw: tuple[str, ...]) -> tuple[str, ...]:
    # "user_email_address" holds an email; "email_notifications" does not
    return pw[:-1] if len(pw) > 1 and pw[-1] in _HOLDER_SUFFIXES else pw


def param_kind(param: str, fmt: str | None = None) -> ValueKind | None:
    """The value kind of an input from its declared format or its head word (``remind_at`` → timestamp)."""
    for kind in VALUE_KINDS:
        if fmt is not None and fmt in kind.formats:
            return kind
    pw = _head(param_words(param))
    if not pw:
        return None
    if len(pw) > 1 and pw[-1] == "at":  # created_at, remind_at: the "<event>_at" timestamp convention
        return VALUE_KINDS[0]
    for kind in VALUE_KINDS:
        if pw[-1] in kind.words:
            return kind
    return None


def _holds(field_words: list[str], kind: ValueKind) -> bool:
    """An output field of this kind: ``timestamp``, ``created_at``; ``file_path`` but not ``route_path``."""
    event_at = kind is VALUE_KINDS[0] and len(field_words) > 1 and field_words[-1] == "at"
    if field_words[-1] not in kind.words and not event_at:
        return False
    return not kind.producer_words or bool(set(field_words) & kind.producer_words)


def _produces(
    p: ToolProfile, kind: ValueKind, gives: re.Pattern[str]
) -> tuple[float, str, frozenset[str]] | None:
    """How strongly ``p`` shows that making ``kind`` values is its job: (score, evidence, qualifiers)
    or ``None``; the qualifiers are the other words of what it makes (``stream`` of ``stream_url``).

    Its name saying so counts most (``get_timestamp``, ``determine_coordinates``); an output field or
    a "returns ..." phrase alone does not make a producer (a mentor search that returns a contact
    email is not where a sign-up form's email comes from), both together do.
    """
    made = kind.producer_words or kind.words
    named = bool(p.verb) and bool(set(p.subject_words) & made)
    fields = sorted(f for f in p.outputs if _holds(f.split("_"), kind))
    typed = fields or sorted(p.output_formats & kind.formats)
    if not named and not typed:
        return None  # the description alone scores 1: no need to search it (most tools, most kinds)
    said = bool(gives.search(p.description))
    score = 2.0 * named + 1.0 * bool(typed) + 1.0 * said
    if score < 2.0:
        return None
    about = set(p.subject_words) if named else {w for f in fields for w in f.split("_")}
    qualifiers = frozenset(about - kind.words - made - _GENERIC)
    why = [f"its name says it {p.verb}s {kind.name}"] if named else []
    why += [f"outputs {typed[:3]}"] if typed else []
    why += [f"its description says it returns {kind.name}"] if said else []
    return score, "; ".join(why), qualifiers


def _made_kinds(p: ToolProfile) -> list[tuple[str, float, str, frozenset[str]]]:
    """``(kind, score, evidence, qualifiers)`` of each kind ``p`` produces (see ``_produces``)."""
    return p.memo("made kinds", _kinds_made)


def _kinds_made(p: ToolProfile) -> list[tuple[str, float, str, frozenset[str]]]:
    if p.is_setter or p.is_validator:
        return []  # setters and validators take the value
    taken = _taken_kinds(p)  # a tool that takes a kind transforms it, it does not produce it
    made = []
    for kind in VALUE_KINDS:
        shown = None if kind.name in taken else _produces(p, kind, _GIVES_KIND[kind.name])
        if shown is not None:
            made.append((kind.name, *shown))
    return made


_GIVES_KIND = {
    kind.name: re.compile(_GIVES + "(?:" + "|".join(sorted(kind.producer_words or kind.words)) + r")\b")
    for kind in VALUE_KINDS
}
_PRODUCER = EdgeText(
    "producer_rule",
    EdgeKind.PARAMETER_DIRECTLY_DEPENDS_ON,
    "{p} produces the {kind} that {param} takes",
    "{why}",
)


def _producer(
    subjects: Sequence[ToolProfile], universe: Sequence[ToolProfile], scope: Scope | None = None
) -> Iterator[DependencyEdge]:
    """``remind_at`` (a timestamp) ← the tool that outputs timestamps; likewise coordinates, emails,
    URLs and file paths."""
    makers = group_by(universe, _kind_names)  # kept across ingests by a ``Universe``
    for t in subjects:
        formats = dict(t.formats)
        for param in t.params:
            takes = param_kind(param, formats.get(param))
            if takes is None or (scope is not None and not scope.wants(t, takes.name)):
                continue
            # qualified values match both ways: a live stream's URL feeds only an input that says so, and
            # a polygon's coordinates come only from a tool that says polygon
            context = set(param_words(param)) | set(t.name_words)
            head = _head(param_words(param))
            # "<event>_at" names the event, not whose timestamp it is
            wanted = set() if head[-1] == "at" else set(head) - takes.words - _GENERIC
            cands = [
                (score + 0.5 * (p.source == t.source), why, p)
                for p in makers.get(takes.name, ())
                for kind_name, score, why, qualifiers in _made_kinds(p)
                if kind_name == takes.name
                and p.id != t.id
                and not is_sibling(t, p)
                and qualifiers <= context
                and wanted <= set(p.name_words) | {w for f in p.outputs for w in f.split("_")}
            ]
            if not cands:
                continue
            top = max(c[0] for c in cands)
            tier = [c for c in cands if c[0] == top]
            if len(tier) > _MAX_AMBIGUOUS:
                continue  # many tools make this kind equally well: none of them is *the* producer
            best = best_candidate(t, [(s, p) for s, _w, p in tier])
            if best is None:
                continue
            why = next(w for _s, w, p in tier if p is best)
            evidence = f"input {param!r} holds a {takes.name}; {best.id} {why}"
            yield _PRODUCER.edge(t, best, param, kind=takes.name, why=evidence)


def _taken_kinds(t: ToolProfile) -> set[str]:
    formats = dict(t.formats)
    return {k.name for k in (param_kind(x, formats.get(x)) for x in t.params) if k is not None}


def _kind_names(p: ToolProfile) -> list[str]:
    return [made[0] for made in _made_kinds(p)]


producer_rule = Rule("producer_rule", _producer, wants=_taken_kinds, offers=_kind_names)
