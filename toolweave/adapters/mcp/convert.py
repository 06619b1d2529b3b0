"""Pure conversions between MCP wire objects and toolweave records (no I/O here).

Upstream tools become ``ToolRecord``s with ids ``<source>__<name>``; upstream results are cleaned
(no upstream identity stamp) and bounded (huge text is truncated with an explicit note) before the
gateway hands them to its client.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import mcp_types as types

from toolweave.call_errors import ErrorCode, tool_error_result
from toolweave.records import ToolRecord, make_tool_id

__all__ = [
    "SERVER_INFO_META_KEY",
    "error_result",
    "finish_result",
    "tools_to_records",
]

SERVER_INFO_META_KEY = "io.modelcontextprotocol/serverInfo"
"""2026-era servers stamp every result with their identity; the gateway is the server its client sees."""

_HINT_TAGS = {
    "read_only_hint": "read-only",
    "destructive_hint": "destructive",
    "idempotent_hint": "idempotent",
    "open_world_hint": "open-world",
}


def tools_to_records(source: str, tools: Iterable[types.Tool]) -> list[ToolRecord]:
    """Convert one upstream's complete tool list. Deterministic whatever order the upstream lists in:
    ids are assigned in name order, so two names that sanitise alike always get the same ids."""
    taken: set[str] = set()
    records = []
    for tool in sorted(tools, key=lambda t: t.name):
        tool_id = make_tool_id(source, tool.name, taken)
        taken.add(tool_id)
        records.append(tool_to_record(source, tool, tool_id))
    return records


def tool_to_record(source: str, tool: types.Tool, tool_id: str) -> ToolRecord:
    backend: dict[str, Any] = {"tool": tool.name}  # calls go out under the upstream's own name
    tags: list[str] = []
    title = tool.title or ""
    if tool.annotations is not None:
        ann = tool.annotations.model_dump(exclude_none=True)
        if ann:
            backend["annotations"] = ann
        title = title or (tool.annotations.title or "")
        tags = [tag for field, tag in _HINT_TAGS.items() if ann.get(field) is True]
    schema = (
        tool.input_schema if isinstance(tool.input_schema, dict) else {"type": "object", "properties": {}}
    )
    return ToolRecord(
        id=tool_id,
        source=source,
        name=tool.name,
        title=title,
        description=tool.description or "",
        input_schema=dict(schema),
        output_schema=dict(tool.output_schema) if tool.output_schema else None,
        tags=tuple(tags),
        backend=backend,
    )


def error_result(code: ErrorCode, message: str) -> types.CallToolResult:
    """A failed call in the gateway's one error shape (``"<code>: message"`` + structured code)."""
    return tool_error_result(code, message)


def finish_result(result: types.CallToolResult, max_chars: int) -> types.CallToolResult:
    """Strip the upstream's identity stamp and truncate text beyond ``max_chars`` with a note.

    Text blocks share the budget in order; structured content larger than the budget is dropped
    (the text blocks normally carry the same data). The note states the full size so the model
    knows it saw a part.
    """
    update: dict[str, Any] = {}
    if result.meta and SERVER_INFO_META_KEY in result.meta:
        update["meta"] = {k: v for k, v in result.meta.items() if k != SERVER_INFO_META_KEY} or None

    total = sum(len(c.text) for c in result.content if isinstance(c, types.TextContent))
    notes = []
    if total > max_chars:
        budget = max_chars
        content: list[Any] = []
        for block in result.content:
            if isinstance(block, types.TextContent):
                keep = block.text[: max(budget, 0)]
                budget -= len(keep)
                if keep:
                    content.append(block.model_copy(update={"text": keep}))
            else:
                content.append(block)
        notes.append(f"result truncated: showing {max_chars:,} of {total:,} characters")
        update["content"] = content
    if result.structured_content is not None:
        size = len(json.dumps(result.structured_content, default=str))
        if size > max_chars:
            update["structured_content"] = None
            notes.append(f"structured content of {size:,} characters dropped")
    if notes:
        note = types.TextContent(text=f"[toolweave: {'; '.join(notes)}]")
        update["content"] = [*update.get("content", result.content), note]
    return result.model_copy(update=update) if update else result
