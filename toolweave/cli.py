"""The `toolweave` command: a thin typer layer over the library.

Commands build objects from options and call the library; ``ToolweaveError`` becomes a one-line
message on stderr and exit code 1 (``toolweave.commands.options.user_errors``, the only place).
Nothing but command output goes to stdout. Each module in ``COMMANDS`` adds its own commands through
its ``register(app)``: the list below is the whole command line.
"""

from __future__ import annotations

import typer

from toolweave.commands import (
    adapt,
    bench,
    catalog,
    graph,
    manifest,
    openapi,
    search,
    serve,
    settings,
    tools,
    turn,
)

__all__ = ["COMMANDS", "app"]

app = typer.Typer(
    name="toolweave",
    help="An MCP gateway that publishes only the tools a task needs, plus their dependencies.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

COMMANDS = (adapt, bench, catalog, settings, graph, manifest, openapi, search, serve, tools, turn)
"""Command modules, in the order ``toolweave --help`` lists them."""

for _module in COMMANDS:
    _module.register(app)
