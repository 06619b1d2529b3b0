"""`toolweave tools quarantine` and `toolweave tools approve ID...`: review held tool definitions.

Both read the registry's quarantine table directly (no embedding model is loaded); a running gateway
picks approvals up within a second.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from toolweave.commands.options import JsonOption, RegistryOption, settings_for, user_errors

if TYPE_CHECKING:
    from toolweave.registry.quarantine import QuarantineStore

__all__ = ["register"]

tools_app = typer.Typer(
    name="tools", help="Review tool definitions held in quarantine.", no_args_is_help=True
)


def _store(registry: str | None) -> QuarantineStore:
    from toolweave.errors import NotARegistryError
    from toolweave.registry.database import RegistryDatabase, is_uri
    from toolweave.registry.quarantine import QuarantineStore

    settings = settings_for(registry)
    home = settings.home if is_uri(settings.home) else Path(settings.home).expanduser()
    # read-only check: opening the database would roll back a running gateway's write in progress
    if not RegistryDatabase.exists(home, settings.registry_storage_options):
        raise NotARegistryError(
            f"{home} is not a toolweave registry (nothing was ever ingested there); pass --registry"
        )
    return QuarantineStore(home, settings.registry_storage_options)


@tools_app.command("quarantine")
def quarantine_command(registry: RegistryOption = None, as_json: JsonOption = False) -> None:
    """List held tools: why each is held and a diff from its approved definition."""
    with user_errors():
        held = _store(registry).held()
        if as_json:
            rows = [
                {"id": h.id, "source": h.source, "reasons": list(h.reasons), "diff": h.diff()} for h in held
            ]
            typer.echo(json.dumps(rows, indent=2, ensure_ascii=False))
            return
        if not held:
            typer.echo("no tools in quarantine")
            return
        for h in held:
            typer.echo(f"== {h.id} (source {h.source})")
            for reason in h.reasons:
                typer.echo(f"   held: {reason}")
            typer.echo(h.diff() or h.current)
        typer.echo(f"{len(held)} tool(s) held; release with `toolweave tools approve ID...`")


@tools_app.command("approve")
def approve_command(
    ids: Annotated[list[str], typer.Argument(help="Ids of held tools to release (pins their definition).")],
    registry: RegistryOption = None,
) -> None:
    """Approve held tools: their current definition becomes the pinned one."""
    with user_errors():
        released = _store(registry).approve(ids)
        for tool_id in released:
            typer.echo(f"approved {tool_id}")
        for tool_id in sorted(set(ids) - set(released)):
            typer.echo(f"{tool_id} was not held")


def register(app: typer.Typer) -> None:
    """Add this module's commands to the ``toolweave`` app (called by ``toolweave.cli``)."""
    app.add_typer(tools_app, name="tools")
