"""A real MCP upstream (low-level ``mcp.server.Server``, both protocol eras, stdio) whose results come in
every shape a relayed call must carry unchanged: structured content with an output schema, image and
text blocks, error results, slow, huge and dying calls.

Tools: ``weather(city)`` (structured content + its JSON as text, with an output schema), ``picture``
(an image block and a text block), ``fail`` (``is_error``), ``echo(text)``, ``slow(seconds, text)``
(sleeps, then echoes), ``big(size)`` (``size`` characters), ``crash`` (the process exits mid-call),
``liar`` (structured content that breaks its own output schema).

Usage: python shapes.py
"""

from __future__ import annotations

import base64
import json
import os
from typing import Any

import anyio
import mcp_types as types
from mcp.server import Server
from mcp.server.stdio import stdio_server

PNG = base64.b64encode(
    bytes.fromhex("89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c489")
).decode()
WEATHER_OUT = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "temp_c": {"type": "number"}, "tags": {"type": "array"}},
    "required": ["city", "temp_c"],
}


def _tool(name: str, props: dict[str, Any], required: list[str] | None = None, **extra: Any) -> types.Tool:
    schema: dict[str, Any] = {"type": "object", "properties": props}
    if required:
        schema["required"] = required
    return types.Tool(name=name, description=f"Shapes tool {name}.", input_schema=schema, **extra)


TOOLS = [
    _tool("weather", {"city": {"type": "string"}}, ["city"], output_schema=WEATHER_OUT),
    _tool("picture", {}),
    _tool("fail", {}),
    _tool("echo", {"text": {"type": "string"}}, ["text"]),
    _tool("slow", {"seconds": {"type": "number"}, "text": {"type": "string"}}, ["seconds"]),
    _tool("big", {"size": {"type": "integer"}}, ["size"]),
    _tool("crash", {}),
    _tool("liar", {}, output_schema=WEATHER_OUT),  # its structured content breaks its own output schema
]


async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
    return types.ListToolsResult(tools=TOOLS)


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    args = params.arguments or {}
    name = params.name
    if name == "weather":
        data = {"city": args["city"], "temp_c": 21.5, "tags": ["sunny", "ünïcode ✓"]}
        return types.CallToolResult(
            content=[types.TextContent(text=json.dumps(data))], structured_content=data
        )
    if name == "liar":
        lie = {"city": "Atlantis", "temp_c": "warm"}
        return types.CallToolResult(content=[types.TextContent(text=json.dumps(lie))], structured_content=lie)
    if name == "picture":
        return types.CallToolResult(
            content=[types.ImageContent(data=PNG, mime_type="image/png"), types.TextContent(text="a pixel")]
        )
    if name == "fail":
        return types.CallToolResult(content=[types.TextContent(text="it failed on purpose")], is_error=True)
    if name == "slow":
        await anyio.sleep(float(args["seconds"]))
    if name in ("echo", "slow"):
        return types.CallToolResult(content=[types.TextContent(text=f"echo:{args.get('text', '')}")])
    if name == "big":
        return types.CallToolResult(content=[types.TextContent(text="x" * int(args["size"]))])
    if name == "crash":
        os._exit(3)
    return types.CallToolResult(content=[types.TextContent(text=f"unknown tool {name}")], is_error=True)


async def main() -> None:
    server: Server[Any] = Server("shapes", version="1.0", on_list_tools=list_tools, on_call_tool=call_tool)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
