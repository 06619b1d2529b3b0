"""A quick "valid" for the plain JSON Schemas most tools declare, before jsonschema is asked at all.

Every proxied call checks its arguments against the tool's input schema, and every structured result
against its output schema. jsonschema walks a schema by building a validator per sub-schema and a
generator per keyword: for a four-field object it was an eighth of the gateway's work per proxied call.
Most tools' schemas are plain: objects of typed fields, a ``required`` list, arrays of such. ``quick_check``
turns a schema made only of those keywords into a check that answers True only when jsonschema would
find no error; anything else (a schema with other keywords, an instance that fails or that it cannot
judge) gets None from ``quick_check`` or False from the check, and the caller asks jsonschema as before,
so every error message and every edge case (``1.0`` as an integer, ``$ref``, formats, enums) stays
jsonschema's.

Plain keywords: ``type`` (a name or a list of names), ``properties``, ``required``,
``additionalProperties`` (a boolean or a plain schema), ``items`` (a plain schema), and annotations that
never fail an instance (``title``, ``description``, ``default``, ``examples``, ``deprecated``,
``readOnly``, ``writeOnly``, ``$comment``). A schema may be ``true``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["Check", "quick_check"]

Check = Callable[[Any], bool]
"""True: jsonschema finds no error in the instance. False: not known (ask jsonschema)."""

_ANNOTATIONS = frozenset(
    {"title", "description", "default", "examples", "deprecated", "readOnly", "writeOnly", "$comment"}
)
_STRUCTURE = frozenset({"type", "properties", "required", "additionalProperties", "items"})
_MAX_DEPTH = 16


def _is_string(value: Any) -> bool:
    return type(value) is str


def _is_integer(value: Any) -> bool:
    return type(value) is int  # jsonschema also takes 1.0: left to it


def _is_number(value: Any) -> bool:
    return type(value) is int or type(value) is float


def _is_boolean(value: Any) -> bool:
    return type(value) is bool


def _is_null(value: Any) -> bool:
    return value is None


def _is_object(value: Any) -> bool:
    return type(value) is dict


def _is_array(value: Any) -> bool:
    return type(value) is list


_TYPES: dict[str, Check] = {
    "string": _is_string,
    "integer": _is_integer,
    "number": _is_number,
    "boolean": _is_boolean,
    "null": _is_null,
    "object": _is_object,
    "array": _is_array,
}


def quick_check(schema: Any) -> Check | None:
    """A quick check for ``schema`` when it is plain (module docstring), else None."""
    return _compile(schema, 0)


def _compile(schema: Any, depth: int) -> Check | None:
    if schema is True:
        return _anything
    if not isinstance(schema, Mapping) or depth > _MAX_DEPTH:
        return None
    if not all(isinstance(key, str) for key in schema):
        return None
    if any(key not in _STRUCTURE and key not in _ANNOTATIONS for key in schema):
        return None
    if not _annotations_well_formed(schema):
        return None
    type_check = _type_check(schema.get("type", _ABSENT))
    if type_check is None:
        return None
    fields = _fields(schema, depth)
    items = _items(schema, depth)
    if fields is None or items is None:
        return None
    return _build(type_check, fields, items)


_ABSENT = object()


def _anything(value: Any) -> bool:
    return True


def _annotations_well_formed(schema: Mapping[str, Any]) -> bool:
    """Annotations of the types the metaschema asks (an ill-formed schema is jsonschema's to report)."""
    for key in ("title", "description", "$comment"):
        if key in schema and not isinstance(schema[key], str):
            return False
    for key in ("deprecated", "readOnly", "writeOnly"):
        if key in schema and not isinstance(schema[key], bool):
            return False
    return "examples" not in schema or isinstance(schema["examples"], list)


def _type_check(declared: Any) -> Check | None:
    if declared is _ABSENT:
        return _anything
    if isinstance(declared, str):
        return _TYPES.get(declared)
    if not isinstance(declared, list) or not declared or len(set(map(str, declared))) != len(declared):
        return None
    checks = [_TYPES.get(name) if isinstance(name, str) else None for name in declared]
    if any(check is None for check in checks):
        return None
    chosen = tuple(check for check in checks if check is not None)
    return lambda value: any(check(value) for check in chosen)


_Fields = tuple[tuple[tuple[str, Check], ...], tuple[str, ...], Check | None]
"""Each named property's check, the required names, and the check of every other property (None: no
other property is allowed)."""


def _fields(schema: Mapping[str, Any], depth: int) -> _Fields | None:
    properties = schema.get("properties", {})
    required = schema.get("required", [])
    extra = schema.get("additionalProperties", True)
    if not isinstance(properties, Mapping) or not isinstance(required, list):
        return None
    if not all(isinstance(name, str) for name in required) or len(set(required)) != len(required):
        return None
    named: list[tuple[str, Check]] = []
    for name, sub in properties.items():
        check = _compile(sub, depth + 1)
        if not isinstance(name, str) or check is None:
            return None
        named.append((name, check))
    if extra is False:
        return tuple(named), tuple(required), None
    others = _compile(extra, depth + 1)
    if others is None:
        return None
    return tuple(named), tuple(required), others


def _items(schema: Mapping[str, Any], depth: int) -> Check | None:
    if "items" not in schema:
        return _anything
    return _compile(schema["items"], depth + 1)


def _build(type_check: Check, fields: _Fields, items: Check) -> Check:
    named, required, others = fields
    known = frozenset(name for name, _ in named)
    plain_object = not named and not required and others is _anything
    plain_array = items is _anything

    def check(value: Any) -> bool:
        if not type_check(value):
            return False
        if type(value) is dict:
            if plain_object:
                return True
            for name in required:
                if name not in value:
                    return False
            for name, sub in named:
                if name in value and not sub(value[name]):
                    return False
            if others is not _anything:
                for name, item in value.items():
                    if name not in known and (others is None or not others(item)):
                        return False
            return True
        if type(value) is list and not plain_array:
            return all(items(item) for item in value)
        # any other instance: properties, required and items do not apply to it
        return type(value) in _SCALARS or type(value) is list

    return check


_SCALARS = frozenset({str, int, float, bool, type(None)})
