"""Adapters: talk to backends (upstream MCP servers, HTTP APIs described by OpenAPI)."""

__all__: list[str] = []
