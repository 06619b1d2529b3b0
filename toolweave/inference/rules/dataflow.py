"""Data-flow rule: an input takes a value that another tool's output schema says it returns.

The producer must return the value (an output field, from its MCP ``outputSchema``, OpenAPI response
or catalog ``output_schema``): a shared *parameter* name between two tools is never evidence. Matches,
strongest first:

* by name: the output field is named like the input (``hotel_name`` ← a search that returns
  ``hotel_name``), or like its unqualified core (``origin_sky_id`` ← ``sky_id``), or it is the ``id``
  of the thing the input identifies (``pet_id`` ← ``findPetsByStatus``'s ``[].id``; ``category_id`` ←
  a ``category.id``);
* by kind: the producer's *product* (one of its one or two top-level fields) holds the kind of value
  the input takes (``image`` ← a text-to-image tool; ``amount`` ← a tool whose product is a
  ``total_price``; ``start_timestamp`` ← a clock's ``datetime``), see ``fields.FLOW_KINDS``. Dates
  and times come only from a tool that needs no input (it tells the present one).

Never: inputs the caller picks from a few values (enums, booleans), filters and paging (``limit``,
``max_price``, ``number_of_rooms``), a match on a one-word name (``target``, ``city``: an attribute of
many records; such inputs match by kind only), credentials (``auth_rule``'s), a record passed as a
string (types must fit), a producer that takes the same input (it echoes the value, it does not make
it), or, for a non-identifier field, a producer that is not a reader (a booking's confirmation repeats
what it was given). Each input gets at most ``MAX_NAMED`` producers by name (finders first) and
``MAX_PRODUCERS`` in all: same source first, then fewer inputs.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator, Sequence
from functools import partial
from itertools import islice

from toolweave.inference.fields import FLOW_KINDS, Field, compatible
from toolweave.inference.producers import ToolProfile
from toolweave.inference.rules.base import (
    AUTH_PARAM_WORDS,
    DIRECT,
    EdgeText,
    Ranked,
    Rule,
    Scope,
)
from toolweave.inference.text import wordset
from toolweave.inference.universe import group_by
from toolweave.records import DependencyEdge

__all__ = ["MAX_NAMED", "MAX_PRODUCERS", "dataflow_rule", "input_keys"]

MAX_PRODUCERS = 8
"""Producers kept per input: a kind many tools make (text, images) links each input to a few of them,
not to every one (at 100k tools that would be quadratic)."""
MAX_NAMED = 3
"""Of them, matched by name: the finders of a record first; the many records that repeat an identifier
(every order carries a ``user_id``) add edges, not knowledge."""

Key = tuple[str, str]
"""``("name", phrase)``, ``("entity", thing)`` or ``("kind", kind)``."""

_SCORES = {"name": 3.0, "entity": 2.5, "suffix": 2.0, "kind": 1.0}
_READ_VERBS = wordset(
    "get list search find lookup look query fetch retrieve read show view describe calculate compute "
    "estimate generate convert translate analyze detect extract recognize transcribe summarize"
)
_ACTION_VERBS = wordset(
    "buy reserve book schedule play send cancel delete remove update set post pay order place submit share "
    "save write edit modify rename move copy upload transfer start stop run execute add create register"
)
"""A tool named for an act returns a confirmation: it repeats what it was given, it does not find it."""
_ID_HEADS = wordset("id code key slug")
_TIME_KINDS = frozenset(("date", "time", "timestamp"))
"""A date or time is the caller's unless a tool tells the present one (no input needed: a clock, today's
date); a date computed from inputs (a due date, a peak sales day) is an answer, not a source of dates."""
_FINDERS = wordset("list search find query lookup look get fetch retrieve")
_NOT_FLOWING = wordset(
    "limit page offset size sort order count radius zoom format mode level flag option rating verbose cursor"
)
_FILTER_FIRST = wordset("max min is has include")
_NOT_ENTITIES = wordset("id data info detail details list item result all by")
_PREPOSITIONS = wordset("by for of with from in on to")
_KIND_CLASS = {
    "image": "media",
    "audio": "media",
    "video": "media",
    "text": "text",
    "date": "time",
    "time": "time",
    "timestamp": "time",
    "url": "locator",
    "path": "locator",
    "email": "locator",
    "phone": "locator",
    "coordinates": "coordinates",
    "amount": "amount",
    "number": "number",
}
"""Kinds calibrated together (``dataflow_rule/kind-<class>``)."""


def _flows(c: Field) -> bool:
    """Can another tool make this input's value (not a choice, a filter, a page or a credential)?"""
    ws = c.words
    if c.choice or not ws or AUTH_PARAM_WORDS.intersection(ws):
        return False
    if "." in c.name and ws[-1] not in _ID_HEADS:
        return False  # a request body holds the new record; only its references to others come from a tool
    if ws[-1] in _NOT_FLOWING or ws[0] in _FILTER_FIRST:
        return False
    return not (len(ws) > 2 and ws[0] == "number" and ws[1] == "of")


def input_keys(c: Field) -> tuple[tuple[Key, float], ...]:
    """The keys an input looks its producers up by, with the score of a match on each."""
    if not _flows(c):
        return ()
    ws = c.words
    keys: list[tuple[Key, float]] = []
    if len(ws) > 1:  # one word (genre, city, date) names an attribute of many records: kinds only
        keys.append((("name", c.phrase), _SCORES["name"]))
    if len(ws) >= 3 and ws[-1] in _ID_HEADS:  # origin_sky_id ← sky_id
        keys += [(("name", "_".join(ws[i:])), _SCORES["suffix"]) for i in range(1, len(ws) - 1)]
    if len(ws) >= 2 and ws[-1] == "id" and ws[-2] not in _NOT_ENTITIES:  # pet_id ← the id of a pet
        keys.append((("entity", ws[-2]), _SCORES["entity"]))
    if c.kind is not None:
        keys.append((("kind", c.kind), _SCORES["kind"]))
    return tuple(keys)


def _entity(p: ToolProfile) -> str | None:
    """The thing a tool's records are: ``findPetsByStatus`` → ``pet`` (the object before a preposition)."""
    head: list[str] = []
    for w in p.object_words:
        if w in _PREPOSITIONS:
            break
        head.append(w)
    return head[-1] if head and head[-1] not in _NOT_ENTITIES else None


def _finds(p: ToolProfile) -> bool:
    """Does ``p`` find or compute things (not act on them)? The first verb of its name says
    (``SkyScrapperSearchAirport`` searches, ``Music.PlaySong`` plays); a name with no verb may."""
    for w in p.memo("dataflow name", _last_segment_words)[:4]:
        if w in _READ_VERBS:
            return True
        if w in _ACTION_VERBS:
            return False
    return True


def _last_segment_words(p: ToolProfile) -> tuple[str, ...]:
    # the profile keeps the verb of the last segment only when it starts the segment
    return (p.verb, *p.object_words) if p.verb else p.object_words


def _is_product(p: ToolProfile, f: Field) -> bool:
    """Is ``f`` what ``p`` makes, not one attribute of a record: one of at most two top-level fields."""
    return not f.depth and sum(1 for g in p.returns if g.depth == 0) <= 2


def _offered(p: ToolProfile) -> dict[Key, tuple[Field, ...]]:
    return p.memo("dataflow offers", _offers_of)


def _offers_of(p: ToolProfile) -> dict[Key, tuple[Field, ...]]:
    """Key → the output fields of ``p`` that match it."""
    found: dict[Key, list[Field]] = {}
    if p.is_setter or p.is_validator:
        return {}
    reader = _finds(p)
    entity = _entity(p)
    for f in p.returns:
        if f.choice or not f.words:
            continue
        identifier = f.words[-1] in _ID_HEADS
        keys: list[Key] = []
        if (reader or identifier) and len(f.words) > 1:
            keys.append(("name", f.phrase))
        if f.owner and (reader or identifier):  # category.id → category_id; owner.username → owner_username
            keys.append(("name", "_".join((*f.owner[-1:], *f.words))))
        if f.words == ("id",):
            if f.owner:
                keys.append(("entity", f.owner[-1]))
            elif entity is not None:
                keys.append(("entity", entity))
        if reader and _is_product(p, f):  # what an act returns is its status, not a product
            if f.kind is not None and (f.kind not in _TIME_KINDS or not p.required):
                keys.append(("kind", f.kind))
            if f.type in ("number", "integer") and not identifier:  # any number feeds a "number" input
                keys.append(("kind", "number"))
        for key in keys:
            found.setdefault(key, []).append(f)
    return {key: tuple(fields) for key, fields in found.items()}


def _offers(p: ToolProfile) -> tuple[Key, ...]:
    return tuple(_offered(p))


def _fed(t: ToolProfile) -> tuple[tuple[Field, tuple[tuple[Key, float], ...]], ...]:
    return t.memo("dataflow inputs", _fed_inputs)


def _fed_inputs(t: ToolProfile) -> tuple[tuple[Field, tuple[tuple[Key, float], ...]], ...]:
    """The inputs another tool may fill, with their keys. A finder's optional inputs are its filters
    (``genre``, ``has_wifi`` of a search): the caller states them, no tool feeds them."""
    finder = _finds(t)
    found = []
    for c in t.inputs:
        keys = input_keys(c)
        if keys and not (finder and c.name.split(".", 1)[0] not in t.required):
            found.append((c, keys))
    return tuple(found)


def _wants(t: ToolProfile) -> set[Hashable]:
    return {key for _c, keys in _fed(t) for key, _score in keys}


def _feeds(t: ToolProfile, c: Field, key: Key, p: ToolProfile) -> Field | None:
    """The field of ``p`` that can fill ``c`` through ``key``, if any."""
    if p.id == t.id:
        return None
    if key[0] != "kind" and any(x.phrase == c.phrase for x in p.inputs):
        return None  # p takes the value itself: it passes it on, it does not make it
    return next((f for f in _offered(p).get(key, ()) if compatible(f, c) and _same_target(f, c)), None)


_LOCATORS = frozenset(("url", "path", "email", "phone"))
_HANDLE_WORDS = FLOW_KINDS["url"] | FLOW_KINDS["path"] | FLOW_KINDS["email"] | FLOW_KINDS["phone"]
_HANDLE_WORDS |= wordset("file address number string")


def _same_target(f: Field, c: Field) -> bool:
    """A locator points at something: a ``redirect_uri`` is not a ``request_uri``, a logo's URL is not
    a stream's. When both say what they point at, they must agree on a word."""
    if f.kind not in _LOCATORS or f.kind != c.kind:
        return True
    said, wanted = set(f.words) - _HANDLE_WORDS, set(c.words) - _HANDLE_WORDS
    return not said or not wanted or bool(said & wanted)


def _can_feed(t: ToolProfile, c: Field, key: Key, p: ToolProfile) -> bool:
    return _feeds(t, c, key, p) is not None


def _dataflow(
    subjects: Sequence[ToolProfile], universe: Sequence[ToolProfile], scope: Scope | None = None
) -> Iterator[DependencyEdge]:
    """Each input's producers by name and by kind (see the module docstring)."""
    index = group_by(universe, _offers)
    orders: dict[Key, Ranked] = {}
    for t in subjects:
        for c, keys in _fed(t):
            if scope is not None and not any(scope.wants(t, k) for k, _s in keys):
                continue
            found: dict[str, tuple[float, ToolProfile, Key, Field]] = {}
            for key, score in keys:
                order = orders.get(key)
                if order is None:
                    order = orders[key] = Ranked.of(index.get(key, ()), partial(_rank, key))
                cap = MAX_PRODUCERS if key[0] == "kind" else MAX_NAMED
                for p in islice(order.first(t, partial(_can_feed, t, c, key)), cap):
                    total = score + _rank(key, p)
                    if p.id not in found or found[p.id][0] < total:
                        field = _feeds(t, c, key, p)
                        assert field is not None
                        found[p.id] = (total, p, key, field)
            ranked = sorted(found.values(), key=partial(_order, t))
            named = [m for m in ranked if m[2][0] != "kind"][:MAX_NAMED]
            chosen = sorted(named + [m for m in ranked if m[2][0] == "kind"], key=partial(_order, t))
            for _score, p, key, field in chosen[:MAX_PRODUCERS]:
                if scope is None or scope.keeps(t, p):
                    yield _edge(t, c, key, p, field)


def _rank(key: Key, p: ToolProfile) -> float:
    """Among the tools returning an identifier or a named value, the ones that find or list records come
    first: a record that merely mentions a ``user_id`` is a weaker source of user ids than a user search."""
    return 0.5 if key[0] != "kind" and p.verb in _FINDERS else 0.0


def _order(t: ToolProfile, m: tuple[float, ToolProfile, Key, Field]) -> tuple[float, bool, bool, int, str]:
    score, p = m[0], m[1]
    return (-score, p.source != t.source, p.kind != "core", len(p.required), p.id)


def _edge(t: ToolProfile, c: Field, key: Key, p: ToolProfile, field: Field) -> DependencyEdge:
    how, value = key
    if how == "kind":
        variant, what = f"/kind-{_KIND_CLASS[value]}", f"a {value}"
        match = f"input {c.name!r} takes {what}; {p.id} makes {field.name!r}"
    else:
        variant = "/name-id" if c.words[-1] in _ID_HEADS else "/name"
        what = f"the {' '.join(c.words)}"
        match = f"input {c.name!r}; {p.id} returns {field.name!r}"
    return _TEXT.edge(t, p, c.name, variant=variant, what=what, match=match)


_TEXT = EdgeText("dataflow_rule", DIRECT, "{p} returns {what} that {param} takes", "{match}")
dataflow_rule = Rule("dataflow_rule", _dataflow, wants=_wants, offers=_offers)
