"""`toolweave` commands: openapi."""

from __future__ import annotations

__all__: list[str] = []
