"""`toolweave search`: one retrieval against the registry, with the reason for every tool."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from toolweave.commands.options import JsonOption, RegistryOption, settings_for, setup_logging, user_errors

if TYPE_CHECKING:
    from toolweave.settings import RetrievalSettings

__all__ = ["register"]

MethodOption = Annotated[
    str | None,
    typer.Option("--method", help="vector, bm25, hybrid, or grtf (hybrid + dependency walk; the default)."),
]


def search(
    query: Annotated[str, typer.Argument(help="What the user wants to do.")],
    top_k: Annotated[
        int | None, typer.Option("--top-k", help="First-pass tools whose dependencies are walked.")
    ] = None,
    final_k: Annotated[int | None, typer.Option("--final-k", help="How many tools to return.")] = None,
    method: MethodOption = None,
    registry: RegistryOption = None,
    json_out: JsonOption = False,
) -> None:
    """Rank the registry's tools for QUERY and say why each is there."""
    setup_logging("WARNING")
    with user_errors():
        import json

        from toolweave.registry import Registry
        from toolweave.retrieval import retrieve_tools

        settings = settings_for(registry)
        params = retrieval_params(settings.retrieval, method=method, top_k=top_k, final_k=final_k)
        reg = Registry.open(settings.home, settings=settings)
        ranked = retrieve_tools(reg, query, params)
        if json_out:
            rows = [
                {
                    "rank": r.rank,
                    "id": r.tool_id,
                    "description": reg.get(r.tool_id).description,
                    "reason": r.reason,
                    "score": round(r.score, 4),
                    "via": r.via,
                    "edge_kind": r.edge_kind,
                    "parameter": r.parameter_name,
                    "why": r.explain(),
                }
                for r in ranked
            ]
            typer.echo(json.dumps(rows, indent=2))
            return
        from rich.console import Console
        from rich.table import Table

        table = Table("#", "tool", "why", title=f"{params.method}: {query}")
        for r in ranked:
            table.add_row(str(r.rank), r.tool_id, r.explain())
        Console().print(table)


def retrieval_params(
    base: RetrievalSettings, *, method: str | None, top_k: int | None, final_k: int | None
) -> RetrievalSettings:
    """The configured retrieval settings with the command line's overrides (validated)."""
    from pydantic import ValidationError

    from toolweave.errors import ConfigError

    update = {
        k: v for k, v in {"method": method, "top_k": top_k, "final_k": final_k}.items() if v is not None
    }
    try:
        return base.model_validate({**base.model_dump(), **update})
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"])
        raise ConfigError(f"--{field.replace('_', '-')}: {first['msg']}") from exc


def register(app: typer.Typer) -> None:
    """Add this module's commands to the ``toolweave`` app (called by ``toolweave.cli``)."""
    app.command("search")(search)
