"""A real MCP upstream built the way most Python MCP servers are: the SDK's ``MCPServer``, whose tools
are typed Python functions that pydantic validates, leniently (``"3"`` is taken for an ``int``).

A help desk: ``close_ticket`` closes a ticket of its own small table, ``set_alarm`` and ``tag_items``
say back each argument with the Python type it arrived as, so a test can tell what reached the tool;
``export_report`` reports its progress page by page (``notifications/progress``).

Usage: python typed.py (stdio); importing it gives ``app`` for an in-process client.
"""

from __future__ import annotations

from typing import Any

import anyio
from mcp.server.mcpserver import Context, MCPServer
from pydantic import BaseModel

app = MCPServer("typed-test-upstream")
TICKETS: dict[int, str] = {1: "open", 2: "open", 3: "open", 4: "open"}


class Options(BaseModel):
    priority: int
    notify: bool = False


def typed(**values: Any) -> dict[str, Any]:
    return {name: [value, type(value).__name__] for name, value in values.items()}


@app.tool()
def close_ticket(ticket_id: int) -> dict[str, Any]:
    """Close a help-desk ticket given its numeric id."""
    if ticket_id not in TICKETS:
        raise ValueError(f"no ticket {ticket_id}")
    TICKETS[ticket_id] = "closed"
    return {"closed": ticket_id, "tickets": {str(k): v for k, v in TICKETS.items()}}


@app.tool()
def set_alarm(hour: int, enabled: bool = True, minutes: float = 0.0, label: str = "") -> dict[str, Any]:
    """Set the desk's wake-up alarm at an hour of the day."""
    return typed(hour=hour, enabled=enabled, minutes=minutes, label=label)


@app.tool()
def tag_items(items: list[int], options: Options | None = None) -> dict[str, Any]:
    """Tag help-desk items by id, with optional tagging options."""
    return {**typed(items=items), "options": options.model_dump() if options else None}


@app.tool()
async def export_report(pages: int, ctx: Context) -> dict[str, Any]:
    """Export the help-desk report page by page, telling the caller how far it has come."""
    for page in range(1, pages + 1):
        await ctx.report_progress(page, pages, f"page {page} of {pages}")
        await anyio.sleep(0.02)
    return {"pages": pages}


if __name__ == "__main__":
    app.run()
