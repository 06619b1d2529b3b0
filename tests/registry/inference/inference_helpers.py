"""Hand-made tool records in no benchmark's vocabulary, for the graph-inference tests."""

from __future__ import annotations

from typing import Any

from toolweave.records import ToolRecord

__all__ = ["tool"]


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
    """A record as a catalog loader would make it (``params``: name → description)."""
    props: dict[str, Any] = {p: {"type": "string", "description": d} for p, d in (params or {}).items()}
    schema: dict[str, Any] = {"type": "object", "properties": props}
    schema["required"] = list(props) if required is None else required
    out = {
        "type": "object",
        "properties": {k: {"type": "string", "description": v} for k, v in (outputs or {}).items()},
    }
    return ToolRecord(
        id=f"{source}__{name}",
        source=source,
        name=name,
        description=description or name.replace("_", " "),
        input_schema=schema,
        output_schema=out if outputs else None,
        kind=kind,  # type: ignore[arg-type]
    )
