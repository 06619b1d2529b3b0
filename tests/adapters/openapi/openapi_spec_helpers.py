"""Helpers shared by the OpenAPI adapter tests (a uniquely named module: `conftest` names collide)."""

from __future__ import annotations

from typing import Any

from toolweave.records import ToolRecord

__all__ = ["json_body", "ok", "output_schema", "param"]


def ok(schema: dict[str, Any] | None = None, code: str = "200") -> dict[str, Any]:
    """A 3.x ``responses`` object with one JSON response."""
    response: dict[str, Any] = {"description": "ok"}
    if schema is not None:
        response["content"] = {"application/json": {"schema": schema}}
    return {code: response}


def param(name: str, where: str, type_: str, **fields: Any) -> dict[str, Any]:
    """An OpenAPI parameter object of a scalar ``type_``, located ``where`` (path, query, header...)."""
    return {"name": name, "in": where, "schema": {"type": type_}, **fields}


def json_body(properties: dict[str, Any], *, optional: bool = False, **schema: Any) -> dict[str, Any]:
    """A ``requestBody`` object (required unless ``optional``): one JSON object with ``properties`` and
    any other ``schema`` keywords (``required=[...]``)."""
    body: dict[str, Any] = {
        "content": {"application/json": {"schema": {"type": "object", **schema, "properties": properties}}}
    }
    return body if optional else {"required": True, **body}


def output_schema(tool: ToolRecord) -> dict[str, Any]:
    """The tool's output schema, which the test expects the parser to have written."""
    assert tool.output_schema is not None, tool.name
    return tool.output_schema
