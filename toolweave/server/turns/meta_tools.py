"""The two tools every session sees: ``find_tools`` and ``call_tool``.

They make the gateway usable by clients that ignore ``list_changed`` (Claude Desktop, Cursor, ...):
``find_tools`` answers with the input schema of each tool it published and why it is there, names
the other tools it found in one line each (``detail`` gives their schemas too), and ``call_tool``
runs any tool of the registry by name, published or not.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import mcp_types as types

from toolweave.call_errors import tool_error_result
from toolweave.records import ToolRecord
from toolweave.retrieval.results import RankedTool
from toolweave.server.calls.coerce import loosely_typed
from toolweave.server.calls.proxy import argument_errors
from toolweave.server.fronts.handshake import (
    ALWAYS_LOAD,
    CALL_TOOL,
    FIND_TOOLS,
    MAX_K,
    META_INPUT_SCHEMAS,
    meta_tool_definitions,
)

__all__ = [
    "ALWAYS_LOAD",
    "CALL_TOOL",
    "FIND_TOOLS",
    "MAX_K",
    "META_INPUT_SCHEMAS",
    "META_TOOL_NAMES",
    "FoundTool",
    "bad_meta_arguments",
    "find_tools_result",
    "meta_arguments",
    "meta_tools",
    "plain_find_tools_arguments",
    "to_mcp_tool",
    "tool_summary",
    "untitled_schema",
]

META_TOOL_NAMES = frozenset({FIND_TOOLS, CALL_TOOL})
QUERY_ECHO_CHARS = 200
"""The answer repeats the query only as this long a prefix: a 1 MB query must not make a 2 MB answer
(HTTP clients cap one SSE event at 1 MB)."""


def meta_tools(meta: dict[str, Any] | None = None) -> list[types.Tool]:
    """The meta-tools, always published first (``meta``: their ``_meta``). Defined as wire JSON in
    ``server/fronts/handshake.py``, which the early front also answers from."""
    return [types.Tool.model_validate(tool, by_name=False) for tool in meta_tool_definitions(meta)]


def to_mcp_tool(
    record: ToolRecord, name: str | None = None, meta: dict[str, Any] | None = None
) -> types.Tool:
    """A registry record as the MCP tool the client sees, published as ``name`` (default: its id),
    with ``meta`` as its ``_meta``."""
    return types.Tool(
        name=name or record.id,
        title=record.title or None,
        description=record.description or record.name,
        input_schema=record.input_schema,
        output_schema=record.output_schema,
        annotations=types.ToolAnnotations.model_validate(record.annotations) if record.annotations else None,
        meta=meta,
    )


def plain_find_tools_arguments(arguments: Mapping[str, Any]) -> bool:
    """Whether ``arguments`` are the usual well-formed ``find_tools`` call: a non-empty string query and
    at most an integer ``k`` in range. Those pass the schema check, whose validator costs the event loop
    more than the rest of a cached answer; anything else still gets it (and its exact messages)."""
    query, k = arguments.get("query"), arguments.get("k", 1)
    return (
        len(arguments) <= 2
        and arguments.keys() <= {"query", "k"}
        and type(query) is str
        and query != ""
        and type(k) is int
        and 1 <= k <= MAX_K
    )


def bad_meta_arguments(tool: str, arguments: Mapping[str, Any]) -> types.CallToolResult | None:
    """The error result for ``arguments`` that break meta-tool ``tool``'s input schema, naming every
    field; None when they do not."""
    problems = argument_errors(META_INPUT_SCHEMAS[tool], arguments)
    if not problems:
        return None
    listed = "; ".join(f"{p['field']}: {p['problem']}" for p in problems)
    return tool_error_result(
        "invalid_arguments",
        f"arguments for {tool} are invalid: {listed}",
        tool=tool,
        details={"errors": problems},
    )


def meta_arguments(
    tool: str, arguments: Mapping[str, Any]
) -> tuple[Mapping[str, Any], types.CallToolResult | None]:
    """Meta-tool ``tool``'s ``arguments`` as the gateway reads them (``k: "5"``, ``arguments`` sent as
    JSON text: read as the schema types them, ``coerce.loosely_typed``), and the error result when they
    still break its schema (naming the fields as sent)."""
    bad = bad_meta_arguments(tool, arguments)
    if bad is None:
        return arguments, None
    loose = loosely_typed(META_INPUT_SCHEMAS[tool], arguments)
    if loose is not None and bad_meta_arguments(tool, loose[0]) is None:
        return loose[0], None
    return arguments, bad


@dataclass(frozen=True, slots=True)
class FoundTool:
    record: ToolRecord
    ranked: RankedTool


def find_tools_result(
    query: str,
    found: Sequence[FoundTool],
    *,
    list_changed: bool,
    published: Collection[str],
    name_of: Callable[[str], str] = str,
    detail: bool = False,
    note: str | None = None,
) -> types.CallToolResult:
    """``find_tools`` answer: the same document as text JSON (for the model) and structured content.

    Compact by default, because it lands in the model's context: ``tools`` holds the tools this request
    chose (strong enough to publish, ``RankedTool.publish``) that are in the session's list
    (``published``; so every one of them is published, and says nothing more about it), each with what
    a call needs (description and input schema, without the schema's display ``title`` annotations)
    and, for a dependency, what it feeds (a search hit needs no word); ``also_found`` names the other
    found tools with a one-line summary each. The query is not repeated. ``detail=True`` gives the
    query (bounded, ``_echo``) and every tool whole, as ``tools`` entries with their source, rank,
    reason, exact schema and ``published`` flag. The schemas stay even when the client lists the tools
    already: Claude Desktop re-lists and keeps its first list, and Claude Code (tool search on, its
    default) defers a tool listed mid-conversation behind its own ToolSearch, so the model may go
    through ``call_tool``, for which it needs them here.

    Each tool is named exactly as the tool list names it (``name_of(id)``), so a direct call works.
    ``note``: what to tell the model instead of the usual note when nothing was found.
    """
    tools: list[dict[str, Any]] = []
    also: dict[str, str] = {}
    fragments: list[str] = []
    for f in found:
        name = name_of(f.record.id)
        if detail:
            entry = {
                "name": name,
                "description": f.record.description,
                "input_schema": f.record.input_schema,
                "source": f.record.source,
                "why": f.ranked.explain(),
                "reason": f.ranked.reason,
                "rank": f.ranked.rank,
                "published": f.record.id in published,
            }
            fragments.append(_entry_text(entry, _constant(f.record, detail=True)[0], _DETAIL_KEYS))
        elif not (f.ranked.publish and f.record.id in published):
            also[name] = _summary(f.record)
            continue
        else:
            text, schema = _constant(f.record, detail=False)
            entry = {"name": name, "description": f.record.description, "input_schema": schema}
            if f.ranked.reason == "dependency" and f.ranked.via is not None:
                entry["why"] = _feeds(f.ranked, name_of)
            fragments.append(_entry_text(entry, text, _COMPACT_KEYS))
        tools.append(entry)
    # the model knows what it asked: only the detailed answer repeats the query
    doc: dict[str, Any] = {"query": _echo(query), "tools": tools} if detail else {"tools": tools}
    if also:
        doc["also_found"] = also
    doc["tool_list_changed"] = list_changed
    if detail:  # the compact answer leaves it to the meta-tools' own descriptions, in every request
        doc["how_to_call"] = HOW_TO_CALL
    if not found:
        doc["note"] = note or "no tool matched; rephrase the task, or some upstreams may be disconnected"
    return types.CallToolResult(
        content=[types.TextContent(text=_document_text(doc, fragments))],
        structured_content=doc,
    )


HOW_TO_CALL = "call a tool directly by the name given here, or with call_tool(name=..., arguments={...})"
SUMMARY_CHARS = 80
"""An unpublished tool's summary: the first line of its description, cut to this length."""

_DETAIL_KEYS = ("description", "input_schema", "source")
_COMPACT_KEYS = ("description", "input_schema")


def _feeds(ranked: RankedTool, name_of: Callable[[str], str]) -> str:
    """Why a dependency is there, in few words: what it feeds (``feeds TOOL.PARAMETER``)."""
    assert ranked.via is not None
    fed = f".{ranked.parameter_name}" if ranked.parameter_name else ""
    return f"feeds {name_of(ranked.via)}{fed}"


def tool_summary(record: ToolRecord) -> str:
    """The one line ``also_found`` gives a tool: its description's first line, cut to ``SUMMARY_CHARS``."""
    return _summary(record)


def _summary(record: ToolRecord) -> str:
    line = (record.description or record.name).strip().split("\n", 1)[0].strip()
    return line if len(line) <= SUMMARY_CHARS else line[: SUMMARY_CHARS - 1].rstrip() + "…"


_SUBSCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
_SUBSCHEMAS = ("items", "additionalProperties", "contains", "not", "if", "then", "else", "propertyNames")
_SUBSCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")


def untitled_schema(schema: Any) -> Any:
    """``schema`` without its ``title`` annotations (display names that repeat the property name:
    they never change what validates). Only the keyword is dropped: a *property* named ``title``
    stays, as does anything that is not a schema (``default``, ``enum``, ``const``, examples)."""
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "title" and isinstance(value, str):
            continue
        if key in _SUBSCHEMA_MAPS and isinstance(value, dict):
            out[key] = {name: untitled_schema(sub) for name, sub in value.items()}
        elif key in _SUBSCHEMAS:
            out[key] = untitled_schema(value)
        elif key in _SUBSCHEMA_LISTS and isinstance(value, list):
            out[key] = [untitled_schema(sub) for sub in value]
        else:
            out[key] = value
    return out


def _dump(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _document_text(doc: dict[str, Any], fragments: Sequence[str]) -> str:
    """``json.dumps(doc, ensure_ascii=False, separators=(",", ":"))``, character for character, with each
    tool's description, schema (and source) encoded once per record (``_constant``): encoding
    those schemas again on every answer was most of the answer's cost."""
    rest = ",".join(f"{_dump(key)}:{_dump(value)}" for key, value in doc.items() if key not in _HEAD)
    query = f'"query":{_dump(doc["query"])},' if "query" in doc else ""
    return f'{{{query}"tools":[{",".join(fragments)}],{rest}}}'


def _entry_text(entry: dict[str, Any], constant: str, constant_keys: tuple[str, ...]) -> str:
    """One ``tools`` entry as compact JSON: its record's constant part (``constant``, the keys in
    ``constant_keys``, right after the name) as encoded once, the rest now."""
    parts = [f'"name":{_dump(entry["name"])}{constant}']
    skipped = ("name", *constant_keys)
    parts += [f"{_dump(key)}:{_dump(value)}" for key, value in entry.items() if key not in skipped]
    return "{" + ",".join(parts) + "}"


_HEAD = ("query", "tools")
_FRAGMENTS: dict[tuple[str, bool], tuple[ToolRecord, str, Any]] = {}
_MAX_FRAGMENTS = 4096


def _constant(record: ToolRecord, *, detail: bool) -> tuple[str, Any]:
    """The encoded constant part of ``record``'s entry, and its schema as shown (records are immutable
    and replaced on change, so the same object means the same text)."""
    cached = _FRAGMENTS.get((record.id, detail))
    if cached is not None and cached[0] is record:
        return cached[1], cached[2]
    schema = record.input_schema if detail else untitled_schema(record.input_schema)
    text = f',"description":{_dump(record.description)},"input_schema":{_dump(schema)}'
    if detail:
        text += f',"source":{_dump(record.source)}'
    if len(_FRAGMENTS) >= _MAX_FRAGMENTS:  # tools removed over a long life must not pile up
        _FRAGMENTS.clear()
    _FRAGMENTS[(record.id, detail)] = (record, text, schema)
    return text, schema


def _echo(query: str) -> str:
    if len(query) <= QUERY_ECHO_CHARS:
        return query
    return f"{query[:QUERY_ECHO_CHARS]}… ({len(query):,} characters)"
