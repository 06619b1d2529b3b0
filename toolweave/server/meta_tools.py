"""The two tools every session sees: ``find_tools`` and ``call_tool``.

They make the gateway usable by clients that ignore ``list_changed`` (Claude Desktop, Cursor, ...):
``find_tools`` answers with each chosen tool's full input schema and why it was chosen, and
``call_tool`` runs any tool of the registry by name, published or not.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import mcp_types as types

from toolweave.records import ToolRecord
from toolweave.retrieval.results import RankedTool

__all__ = [
    "ALWAYS_LOAD",
    "CALL_TOOL",
    "FIND_TOOLS",
    "META_INPUT_SCHEMAS",
    "META_TOOL_NAMES",
    "FoundTool",
    "find_tools_result",
    "meta_tools",
    "to_mcp_tool",
]

FIND_TOOLS = "find_tools"
CALL_TOOL = "call_tool"
META_TOOL_NAMES = frozenset({FIND_TOOLS, CALL_TOOL})
MAX_K = 50
QUERY_ECHO_CHARS = 200
"""The answer repeats the query only as this long a prefix: a 1 MB query must not make a 2 MB answer
(HTTP clients cap one SSE event at 1 MB)."""

_FIND_TOOLS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "query": {
            "type": "string",
            "minLength": 1,
            "description": "What you want to do, in plain words (e.g. 'what time is it in Tokyo').",
        },
        "k": {
            "type": "integer",
            "minimum": 1,
            "maximum": MAX_K,
            "description": "How many tools to return at most (default: the gateway's setting).",
        },
    },
    "required": ["query"],
    "additionalProperties": False,
}

_CALL_TOOL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "minLength": 1, "description": "Tool name as returned by find_tools."},
        "arguments": {
            "type": "object",
            "description": "Arguments for that tool, matching the input_schema find_tools returned.",
        },
    },
    "required": ["name"],
    "additionalProperties": False,
}


def meta_tools(meta: dict[str, Any] | None = None) -> list[types.Tool]:
    """The meta-tools, always published first (``meta``: their ``_meta``)."""
    return [
        types.Tool(
            name=FIND_TOOLS,
            title="Find tools",
            description=(
                "Search all tools available through this gateway for the ones a task needs, plus the tools "
                "they depend on. Returns each tool's name, description, full input schema and why it was "
                "chosen; the chosen tools are also added to this session's tool list. Call them directly, "
                "or through call_tool if your client does not refresh its tool list."
            ),
            input_schema=_FIND_TOOLS_SCHEMA,
            annotations=types.ToolAnnotations(read_only_hint=True, open_world_hint=False),
            meta=meta,
        ),
        types.Tool(
            name=CALL_TOOL,
            title="Call a tool",
            description=(
                "Run any tool found with find_tools by its name, with arguments matching its input schema. "
                "Works for tools that are not in your current tool list."
            ),
            input_schema=_CALL_TOOL_SCHEMA,
            meta=meta,
        ),
    ]


META_INPUT_SCHEMAS: dict[str, dict[str, Any]] = {FIND_TOOLS: _FIND_TOOLS_SCHEMA, CALL_TOOL: _CALL_TOOL_SCHEMA}
"""The meta-tools' input schemas by name (looked up on every call: no Tool objects built for that)."""

ALWAYS_LOAD = {"anthropic/alwaysLoad": True}
"""Tool ``_meta`` that keeps Claude Code from deferring a tool behind its own tool search."""


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
        content=[types.TextContent(text=json.dumps(doc, ensure_ascii=False))],
        structured_content=doc,
    )


def _echo(query: str) -> str:
    if len(query) <= QUERY_ECHO_CHARS:
        return query
    return f"{query[:QUERY_ECHO_CHARS]}… ({len(query):,} characters)"
