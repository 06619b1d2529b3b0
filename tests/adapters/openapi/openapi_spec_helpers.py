"""Helpers shared by the OpenAPI adapter tests (a uniquely named module: `conftest` names collide)."""

from __future__ import annotations

from typing import Any

__all__ = ["ok"]


def ok(schema: dict[str, Any] | None = None, code: str = "200") -> dict[str, Any]:
    """A 3.x ``responses`` object with one JSON response."""
    response: dict[str, Any] = {"description": "ok"}
    if schema is not None:
        response["content"] = {"application/json": {"schema": schema}}
    return {code: response}
