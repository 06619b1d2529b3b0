"""One error payload for every failed tool call the gateway answers.

Errors inside ``tools/call`` never become JSON-RPC errors: a 2026-era client would only see a generic
-32603. Every failure (bad arguments, unknown tool, upstream down, timeout, crash) is returned as a
``CallToolResult`` with ``is_error=True`` and the same two parts, so clients and tests can rely on it:

* a text block ``"<code>: <message>"`` that an LLM reads;
* ``structured_content = {"error": {"code", "message", "tool", "details"}}`` for programs.
"""

from __future__ import annotations

from typing import Any, Literal

import mcp_types as types

__all__ = ["ErrorCode", "to_tool_error_result"]

ErrorCode = Literal[
    "invalid_arguments",
    "unknown_tool",
    "unavailable",
    "no_backend",
    "timeout",
    "upstream_error",
    "internal_error",
    "invalid_request",
]


def to_tool_error_result(
    code: ErrorCode,
    message: str,
    *,
    tool: str | None = None,
    details: Any = None,
) -> types.CallToolResult:
    """Build the gateway's error result (``is_error=True``) with one text block and structured details."""
    payload: dict[str, Any] = {"code": code, "message": message, "tool": tool}
    if details is not None:
        payload["details"] = details
    return types.CallToolResult(
        content=[types.TextContent(text=f"{code}: {message}")],
        structured_content={"error": payload},
        is_error=True,
    )
