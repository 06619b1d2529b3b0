"""Calls: one proxied call from the client's name to the backend, and what is observed on the way."""

__all__: list[str] = []
