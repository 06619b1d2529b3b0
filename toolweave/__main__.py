"""The ``toolweave`` command's entry point (also ``python -m toolweave``).

``toolweave serve`` over stdio first starts the early front (``toolweave/server/early.py``), which answers
the MCP handshake while typer, the settings model and the MCP SDK are still being imported, and
``toolweave hook claude-code`` runs without them (``server/host.py``); every other command runs
through the typer app (``toolweave.cli``) as usual.
"""

from __future__ import annotations

import sys

__all__ = ["main"]

_TRANSPORT_OPTIONS = ("--transport", "-t")
_HELP_OPTIONS = ("--help", "-h")


def serves_stdio(args: list[str]) -> bool:
    """Whether ``args`` ask for ``serve`` over stdio (the default transport). Conservative: anything
    unusual says no, and the command then simply starts without the early front."""
    if not args or args[0] != "serve" or any(a in _HELP_OPTIONS for a in args):
        return False
    transport = "stdio"
    for i, arg in enumerate(args):
        if arg in _TRANSPORT_OPTIONS:
            transport = args[i + 1] if i + 1 < len(args) else ""
        elif arg.startswith("--transport="):
            transport = arg.split("=", 1)[1]
        elif arg.startswith("-t") and not arg.startswith("--"):
            transport = arg[2:]
    return transport == "stdio"


def main() -> None:
    if serves_stdio(sys.argv[1:]):
        from toolweave.server import early

        early.start()
    elif sys.argv[1:3] == ["hook", "claude-code"]:
        # the user waits for this one: no typer, no settings model (server/host.py)
        from toolweave.server.host import parse_hook_wait, run_claude_code_hook

        wait = parse_hook_wait(sys.argv[3:])
        if wait is not None:
            sys.exit(run_claude_code_hook(wait))
    from toolweave.cli import app

    app()


if __name__ == "__main__":
    main()
