"""`toolweave adapt`: refit the fleet's own request map from the calls the gateway recorded (or delete it)."""

from __future__ import annotations

from typing import Annotated

import typer

from toolweave.commands.options import JsonOption, RegistryOption, settings_for, setup_logging, user_errors

__all__ = ["register"]

_SAID = {
    "fitted": "fitted and committed: every replica ranks with it from its next poll",
    "too few": "too few recorded calls (Settings.fleet_map_min_examples): no map fitted",
    "unchanged": "no call recorded since the map held was fitted: kept as it is (--force refits)",
    "no gain": "the check fit ranked held-out requests worse: no map fitted, the one held is kept",
}


def adapt(
    reset: Annotated[bool, typer.Option("--reset", help="Delete the fleet map: rank as before it.")] = False,
    force: Annotated[
        bool, typer.Option("--force", help="Refit even when no call was recorded since the last fit.")
    ] = False,
    registry: RegistryOption = None,
    json_out: JsonOption = False,
) -> None:
    """Refit the fleet's request map from recorded traffic (request -> tool called), offline.

    The map moves request vectors towards the tools this fleet's requests led to; tool vectors stay.
    A gateway with Settings.fleet_map_refit_s > 0 does the same on a schedule."""
    setup_logging("WARNING")
    with user_errors():
        import json

        from toolweave.registry import Registry

        settings = settings_for(registry)
        reg = Registry.open(settings.home, settings=settings)
        try:
            if reset:
                gone = reg.fleet_map.reset()
                said = "fleet map deleted" if gone else "no fleet map to delete"
                typer.echo(json.dumps({"reset": gone}) if json_out else said)
                return
            refit = reg.fleet_map.refit(force=force)
        finally:
            reg.close()
        row = {
            "outcome": refit.outcome,
            "examples": refit.examples,
            "requests": refit.requests,
            "tools": refit.tools,
            "held_out_ap_before": round(refit.before, 4),
            "held_out_ap_after": round(refit.after, 4),
        }
        if json_out:
            typer.echo(json.dumps(row))
            return
        typer.echo(
            f"{_SAID[refit.outcome]}\n{refit.examples} recorded calls, {refit.requests} requests, "
            f"{refit.tools} tools; held-out mean average precision {refit.before:.4f} -> {refit.after:.4f}"
        )


def register(app: typer.Typer) -> None:
    """Add this module's commands to the ``toolweave`` app (called by ``toolweave.cli``)."""
    app.command("adapt")(adapt)
