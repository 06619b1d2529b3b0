"""The MCP server clients talk to: sessions, publishing, proxying."""

__all__: list[str] = []
