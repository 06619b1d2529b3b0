"""Hand-made tool records in no benchmark's vocabulary, for the graph-inference tests."""

from __future__ import annotations

from typing import Any

from toolweave.records import ToolRecord

__all__ = ["obj", "rec", "tool"]


def rec(
    source: str,
    name: str,
    inputs: dict[str, Any] | None = None,
    output: dict[str, Any] | None = None,
    *,
    required: list[str] | None = None,
    description: str = "",
    kind: str = "regular",
) -> ToolRecord:
    """A record with typed JSON Schemas (``inputs``: name → property schema; all required unless said)."""
    props = inputs or {}
    schema = {
        "type": "object",
        "properties": props,
        "required": list(props) if required is None else required,
    }
    return ToolRecord(
        id=f"{source}__{name}",
        source=source,
        name=name,
        description=description or name.replace("_", " "),
        input_schema=schema,
        output_schema=output,
        kind=kind,
    )


def obj(**props: Any) -> dict[str, Any]:
    """An object schema with these properties."""
    return {"type": "object", "properties": props}


def tool(
    source: str,
    name: str,
    description: str = "",
    params: dict[str, str] | None = None,
    *,
    required: list[str] | None = None,
    outputs: dict[str, str] | None = None,
    kind: str = "regular",
) -> ToolRecord:
    """A record as a catalog loader would make it (``params``: name → description; strings only)."""

    def strings(fields: dict[str, str]) -> dict[str, Any]:
        return {f: {"type": "string", "description": d} for f, d in fields.items()}

    output = obj(**strings(outputs)) if outputs else None
    return rec(
        source, name, strings(params or {}), output, required=required, description=description, kind=kind
    )
