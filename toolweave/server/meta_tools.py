"""The two tools every session sees: ``find_tools`` and ``call_tool``.

They make the gateway usable by clients that ignore ``list_changed`` (Claude Desktop, Cursor, ...):
``find_tools`` answers with each chosen tool's full input schema and why it was chosen, and
``call_tool`` runs any tool of the registry by name, published or not.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import mcp_types as types

from toolweave.records import ToolRecord
from toolweave.retrieval.results import RankedTool
from toolweave.server.errors import to_tool_error_result
from toolweave.server.handshake import (
    ALWAYS_LOAD,
    CALL_TOOL,
    FIND_TOOLS,
    MAX_K,
    META_INPUT_SCHEMAS,
    meta_tool_definitions,
)
from toolweave.server.proxy import argument_errors

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
    "meta_tools",
    "plain_find_tools_arguments",
    "to_mcp_tool",
]

META_TOOL_NAMES = frozenset({FIND_TOOLS, CALL_TOOL})
QUERY_ECHO_CHARS = 200
"""The answer repeats the query only as this long a prefix: a 1 MB query must not make a 2 MB answer
(HTTP clients cap one SSE event at 1 MB)."""


def meta_tools(meta: dict[str, Any] | None = None) -> list[types.Tool]:
    """The meta-tools, always published first (``meta``: their ``_meta``). Defined as wire JSON in
    ``server/handshake.py``, which the early front also answers from."""
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
    return to_tool_error_result(
        "invalid_arguments",
        f"arguments for {tool} are invalid: {listed}",
        tool=tool,
        details={"errors": problems},
    )


@dataclass(frozen=True, slots=True)
class FoundTool:
    record: ToolRecord
    ranked: RankedTool


def find_tools_result(
    query: str,
    found: Sequence[FoundTool],
    *,
    list_changed: bool,
    published: Sequence[str],
    name_of: Callable[[str], str] = str,
) -> types.CallToolResult:
    """``find_tools`` answer: the same document as text JSON (for the model) and structured content.

    Each tool is named exactly as the tool list names it (``name_of(id)``), so a direct call works.
    """
    tools = [
        {
            "name": name_of(f.record.id),
            "description": f.record.description,
            "input_schema": f.record.input_schema,
            "source": f.record.source,
            "why": f.ranked.explain(),
            "reason": f.ranked.reason,
            "rank": f.ranked.rank,
            "published": f.record.id in published,
        }
        for f in found
    ]
    doc: dict[str, Any] = {
        "query": _echo(query),
        "tools": tools,
        "tool_list_changed": list_changed,
        "how_to_call": (
            "call a tool directly by the name given here, or with call_tool(name=..., arguments={...})"
        ),
    }
    if not tools:
        doc["note"] = "no tool matched; rephrase the task, or some upstreams may be disconnected"
    return types.CallToolResult(
        content=[types.TextContent(text=_document_text(doc, found))],
        structured_content=doc,
    )


def _dump(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _document_text(doc: dict[str, Any], found: Sequence[FoundTool]) -> str:
    """``json.dumps(doc, ensure_ascii=False)``, character for character, with each tool's description,
    schema and source encoded once per record (``_constant_part``): encoding those schemas again on
    every answer was most of the answer's cost."""
    tools = ", ".join(
        "".join(
            (
                '{"name": ',
                _dump(entry["name"]),
                _constant_part(f.record),
                ', "why": ',
                _dump(entry["why"]),
                ', "reason": ',
                _dump(entry["reason"]),
                ', "rank": ',
                _dump(entry["rank"]),
                ', "published": ',
                _dump(entry["published"]),
                "}",
            )
        )
        for f, entry in zip(found, doc["tools"], strict=True)
    )
    rest = ", ".join(f"{_dump(key)}: {_dump(value)}" for key, value in doc.items() if key not in _HEAD)
    return f'{{"query": {_dump(doc["query"])}, "tools": [{tools}], {rest}}}'


_HEAD = ("query", "tools")
_FRAGMENTS: dict[str, tuple[ToolRecord, str]] = {}
_MAX_FRAGMENTS = 4096


def _constant_part(record: ToolRecord) -> str:
    """The encoded description, input schema and source of ``record`` (records are immutable and
    replaced on change, so the same object means the same text)."""
    cached = _FRAGMENTS.get(record.id)
    if cached is not None and cached[0] is record:
        return cached[1]
    text = (
        f', "description": {_dump(record.description)}, "input_schema": {_dump(record.input_schema)}, '
        f'"source": {_dump(record.source)}'
    )
    if len(_FRAGMENTS) >= _MAX_FRAGMENTS:  # tools removed over a long life must not pile up
        _FRAGMENTS.clear()
    _FRAGMENTS[record.id] = (record, text)
    return text


def _echo(query: str) -> str:
    if len(query) <= QUERY_ECHO_CHARS:
        return query
    return f"{query[:QUERY_ECHO_CHARS]}… ({len(query):,} characters)"
