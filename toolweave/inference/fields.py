"""The fields a tool takes and returns, read from its JSON Schemas, and the kind of value each holds.

A producer feeds a consumer when one of its output fields holds what one of the consumer's inputs
takes. Output schemas come from MCP ``outputSchema``, OpenAPI responses (the adapter wraps a
non-object response under ``result``) and catalogs' ``output_schema``; they nest (``$ref`` to
``$defs`` / ``definitions`` / ``components``, arrays of records, a record inside a record). A field
keeps its name's words, its JSON type, its ``format`` and the record it sits in (``owner``: the
``id`` of an ``owner`` record is the owner's id).

Kinds are generic value vocabulary (``FLOW_KINDS``): media (image, audio, video), text, time (date,
time, timestamp), locators (URL, path, email, phone), coordinates and amounts of money. A field's
kind is read from its JSON Schema ``format`` or the head word of its name (``start_date`` → date,
``created_at`` → timestamp, ``profile_image_url`` → url), never from a tool's name.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from toolweave.inference.text import singular, words, wordset

__all__ = [
    "FLOW_KINDS",
    "Field",
    "compatible",
    "field_kind",
    "input_fields",
    "norm_words",
    "output_fields",
]

_COUNT = re.compile(r"(?<=[a-z])[0-9]+$")
_ID_WORDS = {"identifier": "id", "ids": "id", "uuid": "id", "guid": "id"}
_MAX_FIELDS = 64
"""Output fields read per tool: a huge response schema says no more about what flows than its start."""
_MAX_DEPTH = 2
"""Records read inside records (``owner.id``): deeper fields are details of details."""
_WRAPPERS = wordset("result results data items item response payload value content body records")
_SCALARS = frozenset(("string", "number", "integer"))

FLOW_KINDS: Mapping[str, frozenset[str]] = {
    "image": wordset("image photo picture img thumbnail"),
    "audio": wordset("audio sound speech voice recording"),
    "video": wordset("video"),
    "text": wordset(
        "text message sentence paragraph passage lyrics transcript transcription caption summary translation "
        "article joke headline story poem quote definition"
    ),
    "date": wordset("date day birthday birthdate"),
    "time": wordset("time"),
    "timestamp": wordset("timestamp datetime epoch"),
    "url": wordset("url uri link href"),
    "path": wordset("path filepath filename"),
    "email": wordset("email"),
    "phone": wordset("phone"),
    "coordinates": wordset("coordinates coordinate latitude longitude lat lon lng latlng geolocation"),
    "amount": wordset(
        "amount price cost salary payment tax tip fee profit revenue income expense sales principal bill "
        "balance fare rent budget"
    ),
    "number": wordset("number num"),
}
"""Kinds of values that flow from one tool into another, by the head word of a field's name."""
_FORMAT_KINDS = {
    "date": "date",
    "date-time": "timestamp",
    "time": "time",
    "email": "email",
    "idn-email": "email",
    "uri": "url",
    "url": "url",
    "iri": "url",
    "uri-reference": "url",
}
_NUMERIC_KINDS = frozenset(("amount", "number"))
"""Kinds whose values are numbers: a string field named ``price_range`` is no amount."""
_HOLDERS = wordset("address string value str")
"""Head words that say how a value is held, not what it is (``email_address`` is an email)."""


@dataclass(frozen=True)
class Field:
    """One input or output field."""

    name: str
    """The parameter (``body.petId`` inside an OpenAPI request body) or the output path
    (``result[].id``)."""
    words: tuple[str, ...]
    """Its name's words, normalised (``petIds`` → ``("pet", "id")``)."""
    type: str | None
    """JSON type; for an array, its items' type (``many`` is then true)."""
    many: bool = False
    format: str | None = None
    owner: tuple[str, ...] = ()
    """Words of the record it sits in (``("owner",)`` for ``owner.id``); empty at the top."""
    choice: bool = False
    """An enum or a boolean: the caller picks one of a few values, no tool makes them."""
    depth: int = 0

    @property
    def phrase(self) -> str:
        return "_".join(self.words)

    @property
    def kind(self) -> str | None:
        return field_kind(self.words, self.type, self.format)


def norm_words(name: str) -> tuple[str, ...]:
    """A field name's words, singular, with ``identifier``/``uuid``/``ids`` read as ``id`` and a
    trailing count dropped (``num1`` → ``num``)."""
    return tuple(_ID_WORDS.get(w, singular(w)) for w in (_COUNT.sub("", w) or w for w in words(name)))


def field_kind(ws: tuple[str, ...], json_type: str | None = None, fmt: str | None = None) -> str | None:
    """The kind of value a field holds (``FLOW_KINDS``), from its ``format`` or its head word."""
    if fmt is not None and fmt in _FORMAT_KINDS:
        return _FORMAT_KINDS[fmt]
    if len(ws) > 1 and ws[-1] in _HOLDERS:
        ws = ws[:-1]
    if not ws:
        return None
    head = ws[-1]
    if len(ws) > 1 and head == "at":  # created_at, remind_at: the "<event>_at" timestamp convention
        return "timestamp"
    if head == "number" and len(ws) > 1 and ws[-2] == "phone":
        return "phone"
    for kind, vocab in FLOW_KINDS.items():
        if head in vocab:
            if kind in _NUMERIC_KINDS and json_type not in ("number", "integer", None):
                return None
            return kind
    return None


class _Schema:
    """One schema document: resolves its local ``$ref``s (``#/$defs/X``, ``#/components/schemas/X``)."""

    def __init__(self, root: Mapping[str, Any]) -> None:
        self.root = root

    def deref(self, node: object) -> Mapping[str, Any]:
        seen: set[str] = set()
        while isinstance(node, Mapping) and isinstance(ref := node.get("$ref"), str):
            if ref in seen or not ref.startswith("#/"):
                return {}
            seen.add(ref)
            target: object = self.root
            for part in ref[2:].split("/"):
                target = (
                    target.get(part.replace("~1", "/").replace("~0", "~"))
                    if isinstance(target, Mapping)
                    else None
                )
            node = target
        return node if isinstance(node, Mapping) else {}

    def parts(self, node: object) -> Iterator[Mapping[str, Any]]:
        """The schema and the branches of its ``allOf`` / ``anyOf`` / ``oneOf``, dereferenced."""
        schema = self.deref(node)
        yield schema
        for key in ("allOf", "anyOf", "oneOf"):
            branches = schema.get(key)
            if isinstance(branches, list):
                for branch in branches[:8]:
                    yield from self.parts(branch)

    def properties(self, node: object) -> dict[str, object]:
        found: dict[str, object] = {}
        for part in self.parts(node):
            props = part.get("properties")
            if isinstance(props, Mapping):
                found.update({k: v for k, v in props.items() if isinstance(k, str)})
        return found

    def type_of(self, node: object) -> tuple[str | None, bool, Mapping[str, Any]]:
        """``(type, is an array, the schema of one value)``: an array reads as its items."""
        schema = self.deref(node)
        json_type = _json_type(schema)
        if json_type == "array":
            items = self.deref(schema.get("items"))
            return _json_type(items) or ("object" if self.properties(items) else None), True, items
        if json_type is None and self.properties(schema):
            json_type = "object"
        return json_type, False, schema


def _json_type(schema: Mapping[str, Any]) -> str | None:
    t = schema.get("type")
    if isinstance(t, list):
        t = next((x for x in t if x != "null"), None)
    if isinstance(t, str):
        return t
    if "properties" in schema:
        return "object"
    if "items" in schema:
        return "array"
    for key in ("anyOf", "oneOf"):  # Optional[str] as pydantic writes it: anyOf [string, null]
        branches = schema.get(key)
        if isinstance(branches, list):
            kinds = {b.get("type") for b in branches if isinstance(b, Mapping)} - {"null", None}
            if len(kinds) == 1:
                only = kinds.pop()
                return only if isinstance(only, str) else None
    return None


def input_fields(schema: object) -> tuple[Field, ...]:
    """The inputs of an input schema: its properties, and the fields of an object-typed property (an
    OpenAPI request ``body``: ``body.petId``) whose own top-level name says nothing."""
    if not isinstance(schema, Mapping):
        return ()
    doc = _Schema(schema)
    found: list[Field] = []
    for name, node in doc.properties(schema).items():
        json_type, many, item = doc.type_of(node)
        found.append(_field(name, json_type, many, item, (), 0))
        if json_type == "object" and not many and norm_words(name) and norm_words(name)[-1] in _WRAPPERS:
            for inner, inner_node in list(doc.properties(item).items())[:_MAX_FIELDS]:
                inner_type, inner_many, inner_item = doc.type_of(inner_node)
                found.append(_field(f"{name}.{inner}", inner_type, inner_many, inner_item, (), 1, inner))
    return tuple(found)


def output_fields(schema: object) -> tuple[Field, ...]:
    """The fields an output schema returns: top-level properties (through a single wrapper such as
    ``result`` or ``data``, and through arrays of records) and the fields of records inside them, up to
    ``_MAX_DEPTH`` and ``_MAX_FIELDS``."""
    if not isinstance(schema, Mapping):
        return ()
    doc = _Schema(schema)
    root: object = schema
    for _ in range(2):  # {"result": [...]} / {"data": {...}}: the records are inside
        props = doc.properties(root)
        if len(props) != 1:
            break
        ((name, node),) = props.items()
        json_type, _many, item = doc.type_of(node)
        if json_type != "object" or not norm_words(name) or norm_words(name)[-1] not in _WRAPPERS:
            break
        root = item
    json_type, _many, item = doc.type_of(root)
    found: list[Field] = []
    _collect(doc, item if json_type == "object" else root, (), "", 0, found)
    return tuple(found)


def _collect(
    doc: _Schema, node: object, owner: tuple[str, ...], prefix: str, depth: int, out: list[Field]
) -> None:
    for name, child in doc.properties(node).items():
        if len(out) >= _MAX_FIELDS:
            return
        json_type, many, item = doc.type_of(child)
        path = f"{prefix}{name}{'[]' if many else ''}"
        out.append(_field(path, json_type, many, item, owner, depth, name))
        if json_type == "object" and depth < _MAX_DEPTH:
            _collect(doc, item, norm_words(name), path + ".", depth + 1, out)


def _field(
    path: str,
    json_type: str | None,
    many: bool,
    schema: Mapping[str, Any],
    owner: tuple[str, ...],
    depth: int,
    name: str | None = None,
) -> Field:
    fmt = schema.get("format")
    return Field(
        name=path,
        words=norm_words(name if name is not None else path),
        type=json_type,
        many=many,
        format=fmt if isinstance(fmt, str) else None,
        owner=owner,
        choice=isinstance(schema.get("enum"), list) or json_type == "boolean",
        depth=depth,
    )


def compatible(produced: Field, taken: Field) -> bool:
    """Can a value of ``produced`` be passed as ``taken``? Scalars pass as one another (an id may be a
    number on one side and a string on the other), a record only as a record, a boolean only as a
    boolean; a list of values feeds one value and the other way round."""
    a, b = produced.type, taken.type
    if a is None or b is None:
        return True
    if a in _SCALARS and b in _SCALARS:
        return True
    return a == b
