"""`toolweave ingest-catalog` and `toolweave reindex`: fill a registry from files, re-embed it."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from toolweave.commands.options import JsonOption, RegistryOption, settings_for, setup_logging, user_errors

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["register"]


def ingest_catalog(
    files: Annotated[
        list[Path],
        typer.Argument(
            help="ToolLinkOS JSON, an MCP tools/list result, normalized tools.jsonl, or a folder of them."
        ),
    ],
    source: Annotated[str, typer.Option("--source", "-s", help="Source name: the tools' id prefix.")],
    registry: RegistryOption = None,
    keep_missing: Annotated[
        bool, typer.Option("--keep-missing", help="Keep the source's tools that these files no longer list.")
    ] = False,
    serve: Annotated[
        bool,
        typer.Option(
            "--serve",
            help="Record the catalog among the registry's shared sources: every gateway on this registry "
            "serves its tools (replicas within a poll), not only those whose manifest names it.",
        ),
    ] = False,
    json_out: JsonOption = False,
) -> None:
    """Add a catalog's tools and dependency edges to the registry (only changed tools are embedded)."""
    setup_logging("WARNING")
    with user_errors():
        import json

        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        from toolweave.registry import Registry, load_catalog

        catalog = load_catalog(files, source)
        settings = settings_for(registry)
        reg = Registry.open(settings.home, settings=settings)
        with Progress(
            TextColumn("embedding"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            transient=True,
            console=_stderr_console(),
        ) as bar:
            task = bar.add_task("embed", total=None)
            summary = reg.ingest(
                source,
                catalog.tools,
                catalog.edges,
                replace_source=not keep_missing,
                progress=lambda done, total: bar.update(task, completed=done, total=total),
            )
        if serve:
            from toolweave.registry.sources import CATALOG_KIND, SourceSpec

            reg.set_source_specs([SourceSpec(source, CATALOG_KIND, "{}")])
        elif source not in {s.name for s in reg.source_specs()}:
            typer.echo(
                f"note: gateways serve {source}'s tools only if their manifest lists the catalog; "
                "ingest with --serve to have every gateway on this registry serve them",
                err=True,
            )
        reg.close()
        for skipped in catalog.skipped_edges:
            typer.echo(f"skipped edge {skipped}", err=True)
        if json_out:
            typer.echo(json.dumps({k: v for k, v in vars(summary).items() if k != "skipped_edges"}))
        else:
            typer.echo(str(summary))


def reindex(
    registry: RegistryOption = None,
    model: Annotated[
        str | None, typer.Option("--model", help="fastembed model name (default: the configured one).")
    ] = None,
) -> None:
    """Re-embed every tool with the configured (or given) embedding model, keeping tools and graph.

    The new vectors go into a new table; the registry switches to it in one commit at the end, so an
    interrupted reindex leaves the old registry as it was."""
    setup_logging("WARNING")
    with user_errors():
        from toolweave.registry import Embedder, Registry

        settings = settings_for(registry)
        count = Registry.reindex(
            settings.home, embedder=Embedder(model or settings.embedding_model), settings=settings
        )
        typer.echo(f"re-embedded {count} tools in {settings.home}")


def _stderr_console() -> Console:
    from rich.console import Console

    return Console(stderr=True)


def register(app: typer.Typer) -> None:
    """Add this module's commands to the ``toolweave`` app (called by ``toolweave.cli``)."""
    app.command("ingest-catalog")(ingest_catalog)
    app.command("reindex")(reindex)
