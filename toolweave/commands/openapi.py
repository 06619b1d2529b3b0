"""`toolweave openapi SPEC`: show the tools and dependency edges a spec turns into (no registry involved)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from toolweave.commands.options import JsonOption, user_errors

__all__ = ["register"]


def openapi_command(
    spec: Annotated[str, typer.Argument(help="OpenAPI 2.0 / 3.0 / 3.1 document: a path or an http(s) URL.")],
    json_output: JsonOption = False,
    arazzo: Annotated[
        list[Path] | None,
        typer.Option("--arazzo", help="Arazzo workflow file adding step order (repeatable)."),
    ] = None,
    source: Annotated[
        str | None, typer.Option("--source", help="Source name used in tool ids (default: the file's stem).")
    ] = None,
    allow_remote_refs: Annotated[
        bool, typer.Option("--allow-remote-refs", help="Fetch $refs that point to http(s) URLs.")
    ] = False,
    no_infer: Annotated[
        bool, typer.Option("--no-infer", help="Only declared edges (Link Objects, Arazzo), no heuristics.")
    ] = False,
) -> None:
    """Convert SPEC into tools (name, description, input schema) and dependency edges, and print them."""
    with user_errors():
        from toolweave.adapters.openapi import OpenAPIBackend, OpenAPISourceConfig

        name = source or _stem(spec)
        config = OpenAPISourceConfig(
            name=name,
            spec=spec,
            arazzo=[str(a) for a in arazzo or []],
            allow_remote_refs=allow_remote_refs,
            infer_edges=not no_infer,
        )
        backend = OpenAPIBackend(config)
        tools, edges = backend.load()
        if json_output:
            payload = {
                "tools": [_wire_tool(t) for t in tools],
                "edges": [e.model_dump(mode="json") for e in edges],
                "problems": [{"where": p.where, "message": p.message} for p in backend.problems],
            }
            typer.echo(json.dumps(payload, indent=2, ensure_ascii=False))
            return
        for tool in tools:
            backend_info = tool.backend
            typer.echo(f"{tool.id}  [{backend_info['method']} {backend_info['path']}]")
            first_line = tool.description.splitlines()[0] if tool.description else ""
            typer.echo(f"    {first_line}")
            props = tool.input_schema.get("properties") or {}
            required = set(tool.input_schema.get("required") or [])
            args = ", ".join(f"{p}{'*' if p in required else ''} ({_type_of(s)})" for p, s in props.items())
            typer.echo(f"    inputs: {args or '(none)'}")
        typer.echo(f"\n{len(tools)} tools, {len(edges)} edges")
        for edge in edges:
            param = f" [{edge.parameter_name}]" if edge.parameter_name else ""
            typer.echo(
                f"  {edge.tool} -> {edge.depends_on}{param}  {edge.kind.value} ({edge.origin}): {edge.reason}"
            )
        if backend.problems:
            typer.echo(f"\n{len(backend.problems)} problems (operations skipped or partly converted):")
            for problem in backend.problems:
                typer.echo(f"  {problem}")


def _type_of(schema: Any) -> str:
    """A short label for a property schema: its type(s), or what it refers to."""
    if not isinstance(schema, dict):
        return "any"
    kind = schema.get("type")
    if isinstance(kind, list):
        return "|".join(str(k) for k in kind)
    if isinstance(kind, str):
        return kind
    ref = schema.get("$ref")
    if isinstance(ref, str):
        return ref.rsplit("/", 1)[-1]
    for key in ("anyOf", "oneOf", "allOf"):
        if isinstance(schema.get(key), list):
            return key
    return "any"


def _stem(spec: str) -> str:
    last = spec.rstrip("/").rsplit("/", 1)[-1]
    return last.split(".", 1)[0] or "openapi"


def _wire_tool(tool: Any) -> dict[str, Any]:
    """The MCP wire shape of a tool (what ``tools/list`` would carry)."""
    out: dict[str, Any] = {"name": tool.id, "description": tool.description, "inputSchema": tool.input_schema}
    if tool.title:
        out["title"] = tool.title
    if tool.output_schema is not None:
        out["outputSchema"] = tool.output_schema
    return out


def register(app: typer.Typer) -> None:
    """Add this module's commands to the ``toolweave`` app (called by ``toolweave.cli``)."""
    app.command("openapi")(openapi_command)
