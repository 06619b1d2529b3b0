"""A small real MCP upstream whose tools pass values to each other (low-level ``mcp.server.Server``, stdio).

A shop: ``place_order`` returns a fresh order id, ``get_order_details`` and ``cancel_order`` take one;
``get_forecast`` and ``convert_currency`` stand beside them, unrelated. Results are structured content
(and the same JSON as text). Each process makes its own random ids, so value flow between calls is the
only way a client can know an order id.

Usage: python orders.py
"""

from __future__ import annotations

import json
import secrets
from typing import Any

import anyio
import mcp_types as types
from mcp.server import Server, ServerRequestContext

ORDER_ID = {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]}
TOOLS = [
    types.Tool(
        name="place_order",
        description="Place an order for an item in the shop; returns the new order's id.",
        input_schema={
            "type": "object",
            "properties": {"item": {"type": "string"}, "quantity": {"type": "integer"}},
            "required": ["item"],
        },
    ),
    types.Tool(
        name="get_order_details", description="Status and contents of a shop order.", input_schema=ORDER_ID
    ),
    types.Tool(name="cancel_order", description="Cancel a shop order.", input_schema=ORDER_ID),
    types.Tool(
        name="get_forecast",
        description="Weather forecast for a city.",
        input_schema={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    ),
    types.Tool(
        name="convert_currency",
        description="Convert an amount between two currencies.",
        input_schema={
            "type": "object",
            "properties": {"amount": {"type": "number"}, "to": {"type": "string"}},
            "required": ["amount", "to"],
        },
    ),
]


class Shop:
    def __init__(self) -> None:
        self.orders: dict[str, dict[str, Any]] = {}

    def run(self, name: str, args: dict[str, Any]) -> dict[str, Any]:
        if name == "place_order":
            order_id = f"ORD-{secrets.token_hex(4).upper()}"
            self.orders[order_id] = {
                "item": args["item"],
                "quantity": args.get("quantity", 1),
                "status": "open",
            }
            return {"order_id": order_id, "status": "open"}
        if name in ("get_order_details", "cancel_order"):
            order = self.orders.get(args["order_id"])
            if order is None:
                return {"error": f"no order {args['order_id']}"}
            if name == "cancel_order":
                order["status"] = "cancelled"
            return {"order_id": args["order_id"], **order}
        if name == "get_forecast":
            return {"city": args["city"], "forecast": "sunny", "high_c": 24}
        return {"amount": round(float(args["amount"]) * 0.92, 2), "currency": args["to"]}


def main() -> None:
    shop = Shop()

    async def list_tools(_ctx: ServerRequestContext[Any, Any], _params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=TOOLS)

    async def call_tool(
        _ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        out = shop.run(params.name, dict(params.arguments or {}))
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=json.dumps(out))],
            structured_content=out,
            is_error="error" in out,
        )

    server = Server("orders-test-upstream", version="1.0", on_list_tools=list_tools, on_call_tool=call_tool)
    from mcp.server.stdio import stdio_server

    async def run() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(run)


if __name__ == "__main__":
    main()
