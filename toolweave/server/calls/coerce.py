"""Arguments a model wrote loosely, read the way the upstream would have read them.

Models and agent frameworks often send ``"5"`` for an integer, ``"true"`` for a boolean, an object as
its JSON text, or ``null`` for an optional field they mean to leave out. Servers built on pydantic
(FastMCP, most Python MCP servers) accept all of these, so a gateway that rejected them would be
stricter than the tool it fronts: the call fails through toolweave and works without it. So when a
call's arguments break the tool's input schema, the proxy asks ``loosely_typed`` for a reading that
changes only such values, validates that reading again, and sends it when it passes.

Only readings that lose nothing are taken: a string is read as an integer only when it is one
(``"007"`` stays text for a string field, and ``"1.5"`` is no integer), as a boolean only when it is
``true`` or ``false``, as an object or array only when it parses as JSON of that kind. A value the
schema already accepts is never touched, and a location whose schema allows several types is left to
the upstream (which of them the model meant is not ours to guess). Numbers are not turned into
strings: pydantic refuses that too, and ``7`` for an id ``"007"`` cannot be mended.

Pure functions over the schema and the arguments; the proxy validates the result.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any

__all__ = ["integer_text", "loosely_typed"]

_MAX_DEPTH = 32
_INTEGER = re.compile(r"[+-]?[0-9]{1,300}")
_NOTES = frozenset({"allOf", "title", "description", "default", "examples", "$comment"})


def loosely_typed(schema: Any, arguments: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]] | None:
    """``arguments`` with every loosely written value read as ``schema`` types it, and the paths of the
    values changed (``a.b[2]``); None when no value needed it."""
    reader = _Reader(schema if isinstance(schema, Mapping) else {})
    result = reader.walk(dict(arguments), reader.root, "", 0)
    return (result, reader.changed) if reader.changed else None


class _Reader:
    """One reading of one call's arguments: the schema's root (where ``$ref`` points) and what changed."""

    def __init__(self, root: Mapping[str, Any]) -> None:
        self.root = root
        self.changed: list[str] = []

    def walk(self, value: Any, schema: Any, path: str, depth: int) -> Any:
        resolved = self.resolve(schema, depth)
        typed = self.one_type(resolved, depth) if resolved is not None and depth < _MAX_DEPTH else None
        if typed is None:
            return value
        kind, shape = typed
        if isinstance(value, str) and kind != "string":
            read = _read(value, kind)
            if read is _UNREAD:
                return value
            self.changed.append(path or "(arguments)")
            value = read
        if kind == "object" and type(value) is dict:
            return self.walk_object(value, shape, path, depth)
        items = shape.get("items")
        if kind == "array" and type(value) is list and isinstance(items, Mapping):
            return [self.walk(v, items, f"{path}[{i}]", depth + 1) for i, v in enumerate(value)]
        return value

    def walk_object(
        self, value: dict[str, Any], shape: Mapping[str, Any], path: str, depth: int
    ) -> dict[str, Any]:
        properties = shape.get("properties")
        properties = properties if isinstance(properties, Mapping) else {}
        extra = shape.get("additionalProperties")
        required = shape.get("required")
        required = set(required) if isinstance(required, list) else set()
        out: dict[str, Any] = {}
        for key, item in value.items():
            sub = properties.get(key, extra if isinstance(extra, Mapping) else None)
            where = f"{path}.{key}" if path else key
            if sub is None:
                out[key] = item
                continue
            if item is None and key not in required:
                resolved = self.resolve(sub, depth + 1)
                if resolved is not None and not self.allows_null(resolved, depth + 1):
                    self.changed.append(where)  # null for an optional field the schema types: left out
                    continue
            out[key] = self.walk(item, sub, where, depth + 1)
        return out

    def resolve(self, schema: Any, depth: int) -> Mapping[str, Any] | None:
        """``schema`` itself, or the local definition its ``$ref`` points at (pydantic's ``$defs``), or
        the one branch of a single-branch ``allOf``; None when it is none of those shapes."""
        for _ in range(_MAX_DEPTH - depth):
            if not isinstance(schema, Mapping):
                return None
            ref = schema.get("$ref")
            if isinstance(ref, str):
                if not ref.startswith("#/"):
                    return None
                target: Any = self.root
                for part in ref[2:].split("/"):
                    part = part.replace("~1", "/").replace("~0", "~")
                    target = target.get(part) if isinstance(target, Mapping) else None
                schema = target
                continue
            all_of = schema.get("allOf")
            if isinstance(all_of, list) and len(all_of) == 1 and not schema.keys() - _NOTES:
                schema = all_of[0]
                continue
            return schema
        return None

    def allows_null(self, schema: Mapping[str, Any], depth: int) -> bool:
        kind = schema.get("type")
        if kind == "null" or (isinstance(kind, list) and "null" in kind) or schema.get("nullable") is True:
            return True
        if isinstance(schema.get("enum"), list) and None in schema["enum"]:
            return True
        for key in ("anyOf", "oneOf"):
            branches = schema.get(key)
            for branch in branches if isinstance(branches, list) else ():
                resolved = self.resolve(branch, depth + 1)
                if resolved is not None and self.allows_null(resolved, depth + 1):
                    return True
        return not any(k in schema for k in ("type", "enum", "const", "anyOf", "oneOf", "not", "$ref"))

    def one_type(self, schema: Mapping[str, Any], depth: int) -> tuple[str, Mapping[str, Any]] | None:
        """The one non-null type ``schema`` gives a value, with the (sub)schema that says so: a ``type``
        name, a list of one name and ``null``, or an ``anyOf``/``oneOf`` whose only non-null branch has
        one. None when it allows several (or says nothing)."""
        kind = schema.get("type")
        if isinstance(kind, list):
            named = [k for k in kind if k != "null"]
            kind = named[0] if len(named) == 1 else None
        if isinstance(kind, str):
            return kind, schema
        for key in ("anyOf", "oneOf"):
            branches = schema.get(key)
            if not isinstance(branches, list) or depth >= _MAX_DEPTH:
                continue
            resolved = [self.resolve(b, depth + 1) for b in branches]
            if any(b is None for b in resolved):
                return None
            real = [b for b in resolved if b is not None and b.get("type") != "null"]
            if len(real) == 1:
                return self.one_type(real[0], depth + 1)
        if "properties" in schema:
            return "object", schema
        return None


_UNREAD = object()


def integer_text(text: str) -> int | None:
    """``text`` read as an integer when it is exactly one (``" 12 "``, ``"-3"``), else None."""
    stripped = text.strip()
    return int(stripped) if _INTEGER.fullmatch(stripped) else None


def _read(text: str, kind: str) -> Any:
    """``text`` as a value of JSON type ``kind``, or ``_UNREAD`` when it is not exactly one."""
    stripped = text.strip()
    if kind in ("integer", "number") and (whole := integer_text(stripped)) is not None:
        return whole
    if kind == "number":
        if "_" in stripped:  # Python's float() reads "1_000"; JSON and pydantic do not
            return _UNREAD
        try:
            number = float(stripped)
        except ValueError:
            return _UNREAD
        return number if math.isfinite(number) else _UNREAD
    if kind == "boolean" and stripped.lower() in ("true", "false"):
        return stripped.lower() == "true"
    if kind in ("object", "array") and stripped and stripped[0] in "{[":
        try:
            parsed = json.loads(stripped)
        except ValueError:
            return _UNREAD
        if (kind == "object" and type(parsed) is dict) or (kind == "array" and type(parsed) is list):
            return parsed
    return _UNREAD
