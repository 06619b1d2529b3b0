"""A real MCP upstream that leaks (low-level ``mcp.server.Server``, stdio), for the test that nothing
secret or observed reaches the registry or a log (tests/e2e/test_nothing_stored_e2e.py).

Its tool description echoes the ``VAULT_TOKEN`` it was started with and the ``--label`` argument (as a
careless server might); ``list_accounts`` returns accounts keyed by their ids and an ``access_token``;
``get_balance`` takes an account id (the values are constants here, so that the test knows what to
look for; they are nowhere in the manifest).

Usage: python vault.py --label LABEL
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import anyio
import mcp_types as types
from mcp.server import Server, ServerRequestContext

KEY = "acct-KEYLEAK-5521"
ACCOUNT = "AC-99812-KEYLEAK"
RESULT_TOKEN = "resulttok-J6r3NS82"


def tools() -> list[types.Tool]:
    label = sys.argv[sys.argv.index("--label") + 1] if "--label" in sys.argv else ""
    return [
        types.Tool(
            name="list_accounts",
            description=f"List the bank accounts of the signed-in user (vault {label}, "
            f"token {os.environ.get('VAULT_TOKEN', '')}).",
            input_schema={"type": "object", "properties": {}},
        ),
        types.Tool(
            name="get_balance",
            description="Current balance of one bank account, by its account id.",
            input_schema={
                "type": "object",
                "properties": {"account_id": {"type": "string"}},
                "required": ["account_id"],
            },
        ),
    ]


def run(name: str, args: dict[str, Any]) -> dict[str, Any]:
    if name == "list_accounts":
        return {"accounts": {KEY: {"account_id": ACCOUNT, "kind": "checking"}}, "access_token": RESULT_TOKEN}
    return {"account_id": args.get("account_id"), "balance": 1250.5}


def main() -> None:
    async def list_tools(_ctx: ServerRequestContext[Any, Any], _params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools())

    async def call_tool(
        _ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        out = run(params.name, dict(params.arguments or {}))
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=json.dumps(out))], structured_content=out
        )

    server = Server("vault-test-upstream", version="1.0", on_list_tools=list_tools, on_call_tool=call_tool)
    from mcp.server.stdio import stdio_server

    async def serve() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(serve)


if __name__ == "__main__":
    main()
