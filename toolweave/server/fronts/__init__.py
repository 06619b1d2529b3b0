"""Client fronts: the transports and the early answers a client meets before and around the MCP SDK."""

__all__: list[str] = []
