"""`toolweave settings`: every setting, its environment variable, default and meaning."""

from __future__ import annotations

from typing import Annotated

import typer

__all__ = ["register"]


def settings(
    markdown: Annotated[
        bool, typer.Option("--markdown", help="Print the table docs/settings.md holds.")
    ] = False,
) -> None:
    """List every setting (environment variables use the TOOLWEAVE_ prefix; nested ones use __)."""
    from toolweave.settings import settings_reference

    rows = settings_reference()
    if markdown:
        typer.echo("| setting | environment variable | default | meaning |\n|---|---|---|---|")
        for name, env, default, description in rows:
            typer.echo(f"| `{name}` | `{env}` | `{default}` | {description} |")
        return
    for name, env, default, description in rows:
        typer.echo(f"{name} ({env}, default {default}): {description}")


def register(app: typer.Typer) -> None:
    """Add this module's commands to the ``toolweave`` app (called by ``toolweave.cli``)."""
    app.command("settings")(settings)
