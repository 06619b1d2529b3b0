"""Reading a tool result in a test: its text parts, typed (a result's content is a union of five kinds),
and the structured answer of a call made through the gateway's ``call_tool``."""

from __future__ import annotations

from typing import Any

import mcp_types as types
from mcp import Client


def text(result: types.CallToolResult) -> str:
    """The result's text parts, joined (image, audio and resource parts carry no text)."""
    return "".join(c.text for c in result.content if isinstance(c, types.TextContent))


def text_part(result: types.CallToolResult, index: int = 0) -> str:
    """The text of one content part, which must be a text part."""
    part = result.content[index]
    assert isinstance(part, types.TextContent), part
    return part.text


async def call_through(client: Client, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """Call tool ``name`` through the gateway's ``call_tool`` meta-tool; its structured answer, which must
    be no error."""
    answer = await client.call_tool("call_tool", {"name": name, "arguments": arguments})
    assert not answer.is_error, answer.content
    assert isinstance(answer.structured_content, dict), answer.content
    return answer.structured_content
