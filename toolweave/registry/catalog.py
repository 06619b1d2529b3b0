"""Read tool catalogs from files: ToolLinkOS JSON, an MCP ``tools/list`` result, normalized ``tools.jsonl``.

Each loader returns a ``Catalog`` of records and declared edges, or raises ``CatalogError`` naming
the file and the tool. Loaders are strict: an unknown edge kind, an edge to a tool the catalog does
not hold, a tool without a description are errors, so nothing half-read reaches the registry.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from toolweave.errors import CatalogError
from toolweave.records import DependencyEdge, EdgeKind, ToolRecord, make_tool_id

__all__ = [
    "Catalog",
    "load_catalog",
    "toollinkos_parameters_to_schema",
]

# Evidence strings of edges derived from the benchmark's own queries start like this; such edges
# must never be used when measuring retrieval on those queries (see the datasets' FORMAT.md).
_QUERY_DERIVED_PREFIXES = ("dialogue", "queries", "query", "observed")


@dataclass
class Catalog:
    """Tools and declared edges of one source, ready for ``Registry.ingest``."""

    source: str
    tools: list[ToolRecord] = field(default_factory=list)
    edges: list[DependencyEdge] = field(default_factory=list)
    skipped_edges: list[str] = field(default_factory=list)
    """Edges deliberately left out (query-derived), with why: reported, not silently dropped."""

    def by_name(self) -> dict[str, ToolRecord]:
        return {t.name: t for t in self.tools}


def load_catalog(paths: Sequence[Path], source: str, *, require_description: bool = True) -> Catalog:
    """Detect each file's format and merge them into one catalog for ``source``.

    A directory in the ToolLinkOS layout (``core_tools.json`` + ``regular_tools.json``) or the
    normalized layout (``tools.jsonl``) is read whole. With ``require_description=False`` a tool
    without a description is described by its name (benchmarks of third-party data need this).
    """
    raw_tools: list[tuple[Path, dict[str, Any], str]] = []
    for path in paths:
        raw_tools.extend(_read_any(path))
    return _build(raw_tools, source, require_description)


# -- reading -------------------------------------------------------------------------------------------
def _read_any(path: Path) -> list[tuple[Path, dict[str, Any], str]]:
    """Return ``(file, raw tool, format)`` triples."""
    if path.is_dir():
        if (path / "core_tools.json").exists() or (path / "regular_tools.json").exists():
            files = [p for p in (path / "core_tools.json", path / "regular_tools.json") if p.exists()]
            return [item for f in files for item in _read_any(f)]
        if (path / "tools.jsonl").exists():
            return _read_any(path / "tools.jsonl")
        raise CatalogError(f"{path}: no core_tools.json, regular_tools.json or tools.jsonl in this directory")
    if not path.exists():
        raise CatalogError(f"{path}: no such file")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CatalogError(f"{path}: cannot read: {exc}") from exc
    if path.suffix == ".jsonl":
        out = []
        for lineno, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                out.append((path, _expect_object(json.loads(line), path, f"line {lineno}"), "jsonl"))
            except json.JSONDecodeError as exc:
                raise CatalogError(f"{path}: line {lineno}: malformed JSON: {exc.msg}") from exc
        return out
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CatalogError(
            f"{path}: malformed JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}"
        ) from exc
    if isinstance(doc, dict) and isinstance(doc.get("tools"), list):
        return [(path, _expect_object(t, path, f"tools[{i}]"), "mcp") for i, t in enumerate(doc["tools"])]
    if isinstance(doc, list):
        return [(path, _expect_object(t, path, f"item {i}"), "toollinkos") for i, t in enumerate(doc)]
    raise CatalogError(
        f"{path}: not a catalog: expected a ToolLinkOS list of tools or an MCP tools/list result "
        '({"tools": [...]})'
    )


def _expect_object(item: Any, path: Path, where: str) -> dict[str, Any]:
    if not isinstance(item, dict):
        raise CatalogError(f"{path}: {where}: expected a JSON object, got {type(item).__name__}")
    if not isinstance(item.get("name"), str) or not item["name"].strip():
        raise CatalogError(f"{path}: {where}: tool has no name")
    return item


# -- building ------------------------------------------------------------------------------------------
def _build(
    raw_tools: Iterable[tuple[Path, dict[str, Any], str]], source: str, require_description: bool
) -> Catalog:
    catalog = Catalog(source=source)
    taken: set[str] = set()
    ids: dict[str, str] = {}
    origin: dict[str, Path] = {}
    pending: list[tuple[Path, str, dict[str, Any], str]] = []
    for path, raw, fmt in raw_tools:
        name = raw["name"]
        if name in ids:
            raise CatalogError(f"{path}: tool {name!r}: defined twice (also in {origin[name]})")
        tool_id = make_tool_id(source, name, taken)
        taken.add(tool_id)
        ids[name], origin[name] = tool_id, path
        catalog.tools.append(_record(path, raw, fmt, source, tool_id, require_description))
        pending.append((path, name, raw, fmt))
    for path, name, raw, fmt in pending:
        for edge in _edges(path, name, raw, fmt, ids, catalog):
            catalog.edges.append(edge)
    return catalog


def _record(
    path: Path, raw: Mapping[str, Any], fmt: str, source: str, tool_id: str, require_description: bool
) -> ToolRecord:
    name = raw["name"]
    description = raw.get("description") or raw.get("description_for_model") or ""
    if not isinstance(description, str) or not description.strip():
        if require_description:
            raise CatalogError(f"{path}: tool {name!r}: empty description (retrieval needs one)")
        description = name
    try:
        if fmt == "toollinkos":
            schema = toollinkos_parameters_to_schema(raw.get("parameters") or [])
        elif fmt == "mcp":
            schema = raw.get("inputSchema") or raw.get("input_schema") or {"type": "object", "properties": {}}
        else:
            schema = raw.get("parameters") or {"type": "object", "properties": {}}
        if not isinstance(schema, dict):
            raise TypeError(f"input schema must be an object, got {type(schema).__name__}")
        kind = raw.get("func_type") or raw.get("kind") or "regular"
        if kind not in ("core", "regular"):
            raise ValueError(f"kind must be 'core' or 'regular', got {kind!r}")
        output = raw.get("outputSchema") or raw.get("output_schema") or _output_schema(raw)
        tags = [raw["field"]] if isinstance(raw.get("field"), str) else list(raw.get("tags") or [])
        return ToolRecord(
            id=tool_id,
            source=source,
            name=name,
            title=raw.get("title") or raw.get("name_for_human") or "",
            description=description.strip(),
            input_schema=schema,
            output_schema=output,
            kind=kind,
            examples=tuple(raw.get("examples") or ()),
            tags=tuple(tags),
        )
    except (TypeError, ValueError) as exc:
        raise CatalogError(f"{path}: tool {name!r}: {exc}") from exc


def toollinkos_parameters_to_schema(params: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """ToolLinkOS parameter lists (name/type/description/required/enum/default) as a JSON Schema."""
    props: dict[str, Any] = {}
    required: list[str] = []
    for p in params:
        prop: dict[str, Any] = {"type": _json_type(str(p.get("type", "string")))}
        for key in ("description", "enum", "default"):
            if key in p:
                prop[key] = p[key]
        props[p["name"]] = prop
        if p.get("required"):
            required.append(p["name"])
    schema: dict[str, Any] = {"type": "object", "properties": props}
    if required:
        schema["required"] = required
    return schema


_TYPES = {
    "str": "string",
    "int": "integer",
    "float": "number",
    "bool": "boolean",
    "list": "array",
    "dict": "object",
    "datetime": "string",
}


def _json_type(t: str) -> str:
    t = t.strip().lower()
    valid = {"string", "integer", "number", "boolean", "array", "object", "null"}
    return t if t in valid else _TYPES.get(t, "string")


def _output_schema(raw: Mapping[str, Any]) -> dict[str, Any] | None:
    fields = raw.get("output_parameters") or raw.get("responses")
    if not isinstance(fields, dict) or not fields:
        return None
    props = {
        k: {"type": _json_type(str(v.get("type", "string"))), "description": v.get("description", "")}
        for k, v in fields.items()
        if isinstance(v, dict)
    }
    return {"type": "object", "properties": props}


def _edges(
    path: Path, name: str, raw: Mapping[str, Any], fmt: str, ids: Mapping[str, str], catalog: Catalog
) -> Iterable[DependencyEdge]:
    def target_id(target: str) -> str:
        if target not in ids:
            raise CatalogError(
                f"{path}: tool {name!r}: depends on {target!r}, which this catalog does not hold"
            )
        return ids[target]

    deps = raw.get("depends_on") or []
    if fmt == "jsonl":
        details = raw.get("depends_on_detail")
        if details:
            for d in details:
                evidence = str(d.get("evidence", ""))
                if evidence.lower().startswith(_QUERY_DERIVED_PREFIXES):
                    catalog.skipped_edges.append(f"{name} -> {d.get('tool')}: query-derived ({evidence})")
                    continue
                is_param = d.get("type") == "param" and d.get("param")
                yield DependencyEdge(
                    tool=ids[name],
                    depends_on=target_id(d["tool"]),
                    kind=EdgeKind.PARAMETER_DIRECTLY_DEPENDS_ON
                    if is_param
                    else EdgeKind.TOOL_DIRECTLY_DEPENDS_ON,
                    parameter_name=d.get("param") or None,
                    reason=evidence,
                )
            return
        for target in deps:
            yield DependencyEdge(
                tool=ids[name], depends_on=target_id(str(target)), kind=EdgeKind.TOOL_DIRECTLY_DEPENDS_ON
            )
        return
    for i, d in enumerate(deps):
        if isinstance(d, str):
            d = {"name": d, "dependence_type": "TOOL_DIRECTLY_DEPENDS_ON"}
        try:
            kind = EdgeKind.parse(str(d.get("dependence_type", "")))
        except ValueError as exc:
            raise CatalogError(f"{path}: tool {name!r}: depends_on[{i}]: {exc}") from exc
        yield DependencyEdge(
            tool=ids[name],
            depends_on=target_id(str(d.get("name"))),
            kind=kind,
            parameter_name=d.get("parameter_name") or None,
            reason=str(d.get("reason", "")),
        )
