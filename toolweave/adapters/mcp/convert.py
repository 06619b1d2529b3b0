"""Pure conversions between MCP wire objects and toolweave records (no I/O here).

Upstream tools become ``ToolRecord``s with ids ``<source>__<name>``. Results go back as the upstream
gave them: the proxy finishes every backend's the same way (``toolweave.call_errors.finish_result``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import mcp_types as types

from toolweave.records import ToolRecord, make_tool_id

__all__ = ["tool_to_record", "tools_to_records"]

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
