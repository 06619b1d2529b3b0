"""Reading a tool result in a test: its text parts, typed (a result's content is a union of five kinds)."""

from __future__ import annotations

import mcp_types as types


def text(result: types.CallToolResult) -> str:
    """The result's text parts, joined (image, audio and resource parts carry no text)."""
    return "".join(c.text for c in result.content if isinstance(c, types.TextContent))


def text_part(result: types.CallToolResult, index: int = 0) -> str:
    """The text of one content part, which must be a text part."""
    part = result.content[index]
    assert isinstance(part, types.TextContent), part
    return part.text
