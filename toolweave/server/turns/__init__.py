"""Turns: what a conversation's turn publishes, how the client hears of it, and the two meta-tools."""

__all__: list[str] = []
