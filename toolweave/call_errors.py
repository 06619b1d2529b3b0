"""A proxied call's result as the gateway answers it: the one error payload of a failed call, and the
one step that finishes every result (``finish_result``), shared by the adapters and the server.

Errors inside ``tools/call`` never become JSON-RPC errors: a 2026-era client would only see a generic
-32603. Every failure (bad arguments, unknown tool, upstream down, timeout, crash) is returned as a
``CallToolResult`` with ``is_error=True`` and the same two parts, so clients and tests can rely on it:

* a text block ``"<code>: <message>"`` that an LLM reads;
* ``structured_content = {"error": {"code", "message", "tool", "details"}}`` for programs.

It lives at the package root because backends (``adapters/``) build these results themselves: they
know whether a failure was a timeout, a lost connection or the upstream's own error. Backends return
what their upstream answered; the proxy finishes it once (``finish_result``: the upstream's identity
stamp dropped, text beyond ``max_result_chars`` cut with a note), whatever kind the backend is.
"""

from __future__ import annotations

import json
from typing import Any, Literal

import mcp_types as types

from toolweave.wire_meta import SERVER_INFO_META_KEY

__all__ = [
    "ECHO_NAME_CHARS",
    "ErrorCode",
    "echo_name",
    "error_code_of",
    "finish_result",
    "tool_error_result",
]

_json_size_text = json.JSONEncoder(default=str).encode
"""``json.dumps(..., default=str)``: the same text, without building an encoder on every result."""

ErrorCode = Literal[
    "invalid_arguments",
    "unknown_tool",
    "unavailable",
    "no_backend",
    "timeout",
    "upstream_error",
    "internal_error",
    "invalid_request",
    "tool_error",
]
"""``tool_error``: the tool answered, with its own error result (its content follows the code's line)."""
ECHO_NAME_CHARS = 128
"""A client-chosen tool name echoed in an error is cut to this (a megabyte name must not come back)."""


def echo_name(name: str) -> str:
    """``name`` as an error message may quote it: its head, with its real length when cut."""
    if len(name) <= ECHO_NAME_CHARS:
        return repr(name)
    return f"{name[:ECHO_NAME_CHARS]!r}… ({len(name):,} characters)"


def tool_error_result(
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


def error_code_of(result: types.CallToolResult) -> str | None:
    """The gateway error code carried by ``result``, or None (a success, or a tool's own error answer)."""
    if not result.is_error or not isinstance(result.structured_content, dict):
        return None
    error = result.structured_content.get("error")
    code = error.get("code") if isinstance(error, dict) else None
    return code if isinstance(code, str) else None


def finish_result(result: types.CallToolResult, max_chars: int) -> types.CallToolResult:
    """The one finishing step of a proxied call's result: drop the upstream's identity stamp and cut text
    beyond ``max_chars`` (``Settings.max_result_chars``) with a note.

    Text blocks share the budget in order; structured content larger than the budget is dropped (the
    text blocks normally carry the same data). The note states the full size so the model knows it saw
    a part.
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
        notes.append(f"result truncated to {max_chars:,} of {total:,} characters (max_result_chars)")
        update["content"] = content
    if result.structured_content is not None:
        size = len(_json_size_text(result.structured_content))
        if size > max_chars:
            update["structured_content"] = None
            notes.append(f"structured content of {size:,} characters dropped")
    if notes:
        note = types.TextContent(text=f"[toolweave: {'; '.join(notes)}]")
        update["content"] = [*update.get("content", result.content), note]
    return result.model_copy(update=update) if update else result
