"""OpenAPI adapter: turn an OpenAPI 2.0 / 3.0 / 3.1 spec into tools, dependency edges and real HTTP calls."""

from __future__ import annotations

__all__: list[str] = []
