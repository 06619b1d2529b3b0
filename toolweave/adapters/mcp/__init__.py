"""Upstream MCP servers (stdio, streamable HTTP, SSE) as toolweave backends.

Names load on first use (``toolweave._lazy``): the manifest imports ``adapters.mcp.config`` without
paying for the MCP SDK, so ``toolweave serve`` loads its settings before the SDK is imported.
"""

from typing import TYPE_CHECKING

from toolweave._lazy import lazy_exports

if TYPE_CHECKING:
    from toolweave.adapters.mcp.backend import MCPBackend, StatusCallback
    from toolweave.adapters.mcp.convert import tools_to_records

__all__ = ["MCPBackend", "StatusCallback", "tools_to_records"]

__getattr__ = lazy_exports(
    __name__,
    {
        "MCPBackend": "toolweave.adapters.mcp.backend",
        "StatusCallback": "toolweave.adapters.mcp.backend",
        "tools_to_records": "toolweave.adapters.mcp.convert",
    },
)
