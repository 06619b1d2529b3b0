"""Upstream MCP servers (stdio, streamable HTTP, SSE) as toolweave backends."""

from __future__ import annotations

from toolweave.adapters.mcp.backend import MCPBackend, StatusCallback
from toolweave.adapters.mcp.convert import error_result, finish_result, tools_to_records

__all__ = ["MCPBackend", "StatusCallback", "error_result", "finish_result", "tools_to_records"]
