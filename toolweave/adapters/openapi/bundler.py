"""OpenAPI schemas -> self-contained JSON Schema 2020-12, for tool input and output schemas.

Every referenced schema is converted exactly once per spec (memoised by its canonical ``uri#pointer``)
into a definition named after its last pointer segment. A tool's schema then carries only the
definitions it reaches, in ``$defs``; definitions used once and not part of a cycle are inlined back,
so simple tools read naturally while shared or recursive ones stay referenced. That keeps big specs
small and fast: GitHub's ``repository`` schema is converted once, not once per use, and no output
ever contains a Python-level cycle.

Dialect fixes applied during conversion (OpenAPI 2.0/3.0 are not JSON Schema):
``nullable``/``x-nullable`` -> ``"null"`` in ``type`` (or ``anyOf`` with null), boolean
``exclusiveMinimum``/``exclusiveMaximum`` -> numeric, Swagger ``type: file`` -> binary string,
array-valued ``items`` -> ``prefixItems``; keywords that would make the schema invalid (bad ``type``
names, non-list ``required``, regexes Python cannot compile, ``$id``) are dropped.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator
from typing import Any

from toolweave.adapters.openapi.loader import SpecLoader
from toolweave.errors import OpenAPISpecError

__all__ = ["SchemaBundler"]

logger = logging.getLogger(__name__)

_DEFS_PREFIX = "#/$defs/"
_TYPES = frozenset({"string", "number", "integer", "boolean", "object", "array", "null"})
_SCHEMA_MAPS = frozenset({"properties", "patternProperties", "dependentSchemas"})
_SCHEMA_VALUES = frozenset(
    {
        "additionalProperties",
        "not",
        "contains",
        "if",
        "then",
        "else",
        "propertyNames",
        "unevaluatedItems",
        "unevaluatedProperties",
        "additionalItems",
        "contentSchema",
    }
)
_SCHEMA_LISTS = frozenset({"allOf", "anyOf", "oneOf", "prefixItems"})
# Keywords that change how refs resolve or that only made sense inside the original document.
_DROPPED = frozenset(
    {
        "$id",
        "$schema",
        "$anchor",
        "$dynamicAnchor",
        "$dynamicRef",
        "$defs",
        "definitions",
        "$recursiveRef",
        "$recursiveAnchor",
        "$vocabulary",
        "nullable",
        "x-nullable",
    }
)
_NON_NEGATIVE_INTS = frozenset(
    {
        "minLength",
        "maxLength",
        "minItems",
        "maxItems",
        "minProperties",
        "maxProperties",
        "minContains",
        "maxContains",
    }
)
_MERGEABLE_SIBLINGS = frozenset(
    {"description", "title", "default", "example", "examples", "deprecated", "readOnly", "writeOnly"}
)
_SMALL_DEF_CHARS = 160
_PLACEHOLDER: dict[str, Any] = {}
_pattern_ok: dict[str, bool] = {}


def _valid_pattern(pattern: str) -> bool:
    ok = _pattern_ok.get(pattern)
    if ok is None:
        try:
            re.compile(pattern)
            ok = True
        except (re.error, OverflowError, RecursionError):
            ok = False
        _pattern_ok[pattern] = ok
    return ok


class SchemaBundler:
    """Converts the schemas of one spec; ``convert`` per schema, ``finish`` per tool schema."""

    def __init__(self, loader: SpecLoader, *, openapi_version: str) -> None:
        self._loader = loader
        self._defs: dict[str, Any] = {}
        self._names: dict[str, str] = {}  # canonical ref key -> def name
        self._broken: dict[str, OpenAPISpecError] = {}
        self._sizes: dict[str, int] = {}
        self._refs_memo: dict[str, dict[str, int]] = {}
        # 3.1 schemas are JSON Schema: `$ref` siblings count. Before 3.1 they are ignored by spec.
        self._ref_siblings = openapi_version.startswith("3.1")

    # -- conversion ---------------------------------------------------------------------------------

    def convert(self, node: Any, base_uri: str) -> Any:
        """OpenAPI schema -> JSON Schema 2020-12 whose refs point to ``#/$defs/<name>``."""
        if isinstance(node, bool):
            return node
        if not isinstance(node, dict):
            return {}  # garbage where a schema should be: accept anything rather than fail the tool
        ref = node.get("$ref")
        if isinstance(ref, str):
            out: dict[str, Any] = {"$ref": _DEFS_PREFIX + self._definition(ref, base_uri)}
            siblings = {k: v for k, v in node.items() if k not in ("$ref", "nullable", "x-nullable")}
            if siblings:
                if self._ref_siblings:
                    out.update(self._convert_object(siblings, base_uri))
                elif isinstance(siblings.get("description"), str):
                    out["description"] = siblings["description"]
            if node.get("nullable") is True or node.get("x-nullable") is True:
                return {"anyOf": [out, {"type": "null"}]}
            return out
        return self._convert_object(node, base_uri)

    def _convert_object(self, node: dict[str, Any], base_uri: str) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in node.items():
            if key in _DROPPED:
                continue
            if key in _SCHEMA_MAPS:
                if isinstance(value, dict):
                    out[key] = {str(k): self.convert(v, base_uri) for k, v in value.items()}
            elif key == "items":
                if isinstance(value, list):
                    out["prefixItems"] = [self.convert(v, base_uri) for v in value]
                elif isinstance(value, dict | bool):
                    out["items"] = self.convert(value, base_uri)
            elif key in _SCHEMA_VALUES:
                if isinstance(value, dict | bool):
                    out[key] = self.convert(value, base_uri)
            elif key in _SCHEMA_LISTS:
                if isinstance(value, list) and value:
                    out[key] = [self.convert(v, base_uri) for v in value]
            elif key == "type":
                fixed = _fix_type(value, out)
                if fixed is not None:
                    out["type"] = fixed
            elif key == "required":
                if isinstance(value, list):
                    names = list(dict.fromkeys(v for v in value if isinstance(v, str)))
                    if names:
                        out["required"] = names
            elif key in ("exclusiveMaximum", "exclusiveMinimum"):
                if isinstance(value, bool):
                    bound = node.get("maximum" if key == "exclusiveMaximum" else "minimum")
                    if value and isinstance(bound, int | float):
                        out[key] = bound
                elif isinstance(value, int | float):
                    out[key] = value
            elif key in ("maximum", "minimum"):
                exclusive = node.get("exclusiveMaximum" if key == "maximum" else "exclusiveMinimum")
                if isinstance(value, int | float) and not isinstance(value, bool) and exclusive is not True:
                    out[key] = value
            elif key == "pattern":
                if isinstance(value, str) and _valid_pattern(value):
                    out[key] = value
            elif key == "enum":
                if isinstance(value, list) and value:
                    out[key] = value
            elif key in _NON_NEGATIVE_INTS:
                if (
                    isinstance(value, int | float)
                    and not isinstance(value, bool)
                    and value >= 0
                    and value == int(value)
                ):
                    out[key] = int(value)
            elif key == "multipleOf":
                if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
                    out[key] = value
            elif key == "format":
                if isinstance(value, str):
                    out[key] = value
            elif key == "uniqueItems":
                if isinstance(value, bool):
                    out[key] = value
            elif key in ("description", "title"):
                if isinstance(value, str):
                    out[key] = value
            else:
                out[key] = value
        if node.get("nullable") is True or node.get("x-nullable") is True:
            return _make_nullable(out)
        return out

    def _definition(self, ref: str, base_uri: str) -> str:
        uri, fragment = self._loader.target_uri(ref, base_uri)
        key = f"{uri}#{fragment}"
        name = self._names.get(key)
        if name is not None:
            return name
        if key in self._broken:
            raise self._broken[key]
        name = self._unique_name(fragment, uri)
        self._names[key] = name
        self._defs[name] = _PLACEHOLDER  # registered first: a recursive ref finds the name and stops
        try:
            target, target_uri, _ = self._loader.resolve(ref, base_uri)
            self._defs[name] = self.convert(target, target_uri)
        except OpenAPISpecError as exc:
            del self._names[key]
            del self._defs[name]
            self._broken[key] = exc
            raise
        return name

    def _unique_name(self, fragment: str, uri: str) -> str:
        last = fragment.rstrip("/").rsplit("/", 1)[-1] if fragment.strip("/") else uri.rsplit("/", 1)[-1]
        last = last.replace("~1", "/").replace("~0", "~")
        base = re.sub(r"[^A-Za-z0-9_.-]+", "_", last).strip("_") or "schema"
        base = base[:60]
        name, n = base, 1
        while name in self._defs:
            n += 1
            name = f"{base}_{n}"
        return name

    # -- per-tool assembly --------------------------------------------------------------------------

    def definition(self, name: str) -> Any:
        return self._defs.get(name)

    def deref(self, schema: Any, *, limit: int = 16) -> Any:
        """Follow ``#/$defs/`` refs at the top of a converted schema (for looking at its properties)."""
        for _ in range(limit):
            if not (isinstance(schema, dict) and isinstance(schema.get("$ref"), str)):
                break
            ref = schema["$ref"]
            if not ref.startswith(_DEFS_PREFIX):
                break
            schema = self._defs.get(ref[len(_DEFS_PREFIX) :])
        return schema

    def finish(self, root: dict[str, Any]) -> dict[str, Any]:
        """Attach the definitions ``root`` reaches as ``$defs``, inlining the ones used once."""
        counts: dict[str, int] = {}
        edges: dict[str, set[str]] = {}
        pending = list(_refs(root))
        for name in pending:
            counts[name] = counts.get(name, 0) + 1
        seen: set[str] = set()
        while pending:
            name = pending.pop()
            if name in seen:
                continue
            seen.add(name)
            inner = self._def_refs(name)
            edges[name] = set(inner)
            for child, n in inner.items():
                counts[child] = counts.get(child, 0) + n
                if child not in seen:
                    pending.append(child)
        if not seen:
            return root
        cyclic = _cyclic(edges)
        inline = {
            name
            for name in seen
            if name not in cyclic and (counts.get(name, 0) <= 1 or self._size(name) <= _SMALL_DEF_CHARS)
        }
        memo: dict[str, Any] = {}
        out: dict[str, Any] = self._substitute(root, inline, memo)
        kept = {name: self._substitute_def(name, inline, memo) for name in sorted(seen - inline)}
        if kept:
            out = dict(out)
            out["$defs"] = kept
        return out

    def _def_refs(self, name: str) -> dict[str, int]:
        """Occurrences of each ref inside a definition (memoised: definitions never change once built)."""
        found = self._refs_memo.get(name)
        if found is None:
            found = {}
            for child in _refs(self._defs.get(name)):
                found[child] = found.get(child, 0) + 1
            self._refs_memo[name] = found
        return found

    def _size(self, name: str) -> int:
        size = self._sizes.get(name)
        if size is None:
            size = len(json.dumps(self._defs.get(name), separators=(",", ":"), default=str))
            self._sizes[name] = size
        return size

    def _substitute_def(self, name: str, inline: set[str], memo: dict[str, Any]) -> Any:
        if name not in memo:
            body = self._defs[name]
            # Shared, unchanged definitions are reused as they are: no copy per tool.
            refs = self._def_refs(name)
            memo[name] = self._substitute(body, inline, memo) if any(r in inline for r in refs) else body
        return memo[name]

    def _substitute(self, node: Any, inline: set[str], memo: dict[str, Any]) -> Any:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith(_DEFS_PREFIX) and ref[len(_DEFS_PREFIX) :] in inline:
                body = self._substitute_def(ref[len(_DEFS_PREFIX) :], inline, memo)
                siblings = {k: v for k, v in node.items() if k != "$ref"}
                if not siblings:
                    return body
                siblings = {k: self._substitute(v, inline, memo) for k, v in siblings.items()}
                if isinstance(body, dict) and set(siblings) <= _MERGEABLE_SIBLINGS:
                    return {**body, **siblings}
                return {"allOf": [body], **siblings}
            return {k: self._substitute(v, inline, memo) for k, v in node.items()}
        if isinstance(node, list):
            return [self._substitute(v, inline, memo) for v in node]
        return node


def _fix_type(value: Any, out: dict[str, Any]) -> Any:
    if value == "file":  # Swagger 2.0 file upload
        out.setdefault("format", "binary")
        return "string"
    if isinstance(value, str):
        return value if value in _TYPES else None
    if isinstance(value, list):
        kept = [v for v in dict.fromkeys(value) if isinstance(v, str) and v in _TYPES]
        return kept or None
    return None


def _make_nullable(schema: dict[str, Any]) -> dict[str, Any]:
    kind = schema.get("type")
    if isinstance(kind, str):
        schema["type"] = [kind, "null"] if kind != "null" else kind
    elif isinstance(kind, list):
        if "null" not in kind:
            schema["type"] = [*kind, "null"]
    elif schema:
        return {"anyOf": [schema, {"type": "null"}]}
    else:
        return schema  # already accepts anything
    enum = schema.get("enum")
    if isinstance(enum, list) and None not in enum:
        schema["enum"] = [*enum, None]
    return schema


def _refs(node: Any) -> Iterator[str]:
    """Names of the ``#/$defs/`` refs inside a converted schema, one per occurrence."""
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            ref = item.get("$ref")
            if isinstance(ref, str) and ref.startswith(_DEFS_PREFIX):
                yield ref[len(_DEFS_PREFIX) :]
            stack.extend(v for v in item.values() if isinstance(v, dict | list))
        elif isinstance(item, list):
            stack.extend(v for v in item if isinstance(v, dict | list))


def _cyclic(edges: dict[str, set[str]]) -> set[str]:
    """Names on a cycle of the def graph (Tarjan's SCCs, iterative: real specs nest deeply)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    result: set[str] = set()
    counter = 0
    for start in edges:
        if start in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(start, iter(edges.get(start, ())))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(edges.get(child, ()))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1 or node in edges.get(node, ()):
                    result.update(component)
    return result
