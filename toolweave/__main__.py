"""The ``toolweave`` command's entry point (also ``python -m toolweave``).

``toolweave serve`` over stdio first starts the early front (``toolweave/server/fronts/early.py``), which
answers the MCP handshake while typer, the settings model and the MCP SDK are still being imported; over
streamable HTTP it binds the port and starts the HTTP front (``toolweave/server/fronts/http_front.py``); and
``toolweave hook claude-code`` runs without them (``server/fronts/host.py``); every other command runs
through the typer app (``toolweave.cli``) as usual.
"""

from __future__ import annotations

import os
import sys
from typing import Any

__all__ = ["main"]

_TRANSPORT_OPTIONS = ("--transport", "-t")
_HELP_OPTIONS = ("--help", "-h")


def serve_options(args: list[str]) -> dict[str, str] | None:
    """``--transport``, ``--host`` and ``--port`` of a ``serve`` command line (with their defaults), or
    None when ``args`` are not simply ``serve ...``. Conservative: anything unusual says no, and the
    command then simply starts without an early front."""
    if not args or args[0] != "serve" or any(a in _HELP_OPTIONS for a in args):
        return None
    from toolweave.server.fronts.address import DEFAULT_HOST, DEFAULT_PORT  # socket only: before the bind

    found = {"transport": "stdio", "host": DEFAULT_HOST, "port": str(DEFAULT_PORT)}
    for i, arg in enumerate(args):
        value = args[i + 1] if i + 1 < len(args) else ""
        if arg in _TRANSPORT_OPTIONS:
            found["transport"] = value
        elif arg.startswith("-t") and not arg.startswith("--"):
            found["transport"] = arg[2:]
        elif arg in ("--host", "--port"):
            found[arg[2:]] = value
        elif arg.startswith(("--transport=", "--host=", "--port=")):
            name, _, given = arg[2:].partition("=")
            found[name] = given
    return found


def serves_stdio(args: list[str]) -> bool:
    """Whether ``args`` ask for ``serve`` over stdio (the default transport)."""
    options = serve_options(args)
    return options is not None and options["transport"] == "stdio"


def serves_http(args: list[str]) -> tuple[str, int] | None:
    """The address ``args`` ask ``serve`` to listen on over streamable HTTP, or None."""
    options = serve_options(args)
    if options is None or options["transport"] != "http" or not options["port"].isdigit():
        return None
    return options["host"], int(options["port"])


def registry_option(args: list[str]) -> str | None:
    """The ``--registry`` a ``serve`` command line names, or None. It wins over the manifest's and the
    environment's, so the early front can answer ``find_tools`` from that registry's ready table before
    the settings are even loaded (``server/turns/ready_index.py``)."""
    if serve_options(args) is None:
        return None
    for i, arg in enumerate(args):
        if arg == "--registry" and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith("--registry="):
            return arg.partition("=")[2]
    return None


def manifest_option(args: list[str]) -> str | None:
    """The ``--manifest`` (``-m``) a ``serve`` command line names, or None."""
    for i, arg in enumerate(args):
        if arg in ("--manifest", "-m") and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith("--manifest="):
            return arg.partition("=")[2]
    return None


def _provisional_starting_wait(args: list[str]) -> float:
    """``startup_call_wait_s`` as the settings will say, when certain before they load; else 0."""
    from toolweave.server.fronts import front_answers

    manifest = manifest_option(args)
    try:
        text = open(manifest, encoding="utf-8").read() if manifest else ""  # noqa: SIM115
    except (OSError, ValueError):
        return 0.0
    return front_answers.starting_wait(text, os.environ)


def _provisional_policy(args: list[str], host: str) -> Any:
    """``front_answers.provisional_policy`` for this command line (None when the manifest is unreadable:
    the command reports that)."""
    from toolweave.server.fronts import front_answers
    from toolweave.server.turns import ready_index

    manifest = manifest_option(args)
    try:
        text = open(manifest, encoding="utf-8").read() if manifest else None  # noqa: SIM115
    except (OSError, ValueError):
        text = None
    if text is None:
        return None
    registry = registry_option(args)
    ready = ready_index.load(os.path.expanduser(registry)) if registry and "://" not in registry else None
    return front_answers.provisional_policy(host, text, os.environ, ready)


def _rank_ready_table(registry: str) -> None:
    """Load the query encoder of the registry's ready table on a thread from now on: its answers rank
    with the table's vectors once the settings confirm the model (``server/turns/ready_rank.py``)."""
    from toolweave.server.turns import ready_index  # the fronts' own: imported already

    ready_index.rank_in_background(os.path.expanduser(registry))


def _attach(args: list[str], registry: str | None) -> bytes:
    """With a shared gateway serving this registry for launches like this one (``server/fronts/sharing.py``),
    bridge stdio to it and exit; else what was read of stdin to decide (the early front handles it)."""
    if not registry or "://" in registry:
        return b""
    from toolweave.server.fronts import sharing

    if sharing.KEY_VAR in os.environ:
        return b""  # a shared gateway's own command line is never stdio: nothing to attach to
    home = os.path.expanduser(registry)
    key = sharing.launch_key(args, manifest_option(args), os.environ)
    shared = sharing.discover(home, key)
    if shared is None and sharing.enabled(os.environ) and not sharing.busy(home):
        # none yet: start it and be its first client (one gateway starting, not two on the same cores)
        sharing.spawn(args, home, key)
        shared = sharing.wait_for(home, key, sharing.SPAWN_WAIT_S)
    if shared is None:
        return b""  # off, or the registry serves another command line's launches: start as before
    from toolweave.server.fronts import bridge

    first, relayable = bridge.read_first()
    if not relayable:
        return first  # a 2026-07-28 client (or no client): this launch serves it, as without sharing
    sys.exit(bridge.run(shared, first))


def _announce_shared(args: list[str], port: int) -> None:
    """A shared gateway (``server/fronts/sharing.py``) takes its registry's lock and announces itself as soon
    as its port listens, so the launch that started it attaches within its first tenth of a second; one
    that finds the lock held exits (another shared gateway serves)."""
    from toolweave.server.fronts import sharing

    registry = registry_option(args)
    if sharing.claim_shared() is None or not registry:
        return
    home = os.path.expanduser(registry)
    if sharing.hold(home) is None:
        sys.exit(0)
    key, token = sharing.SERVING or ("", "")
    sharing.announce(home, key, port, token)


def main() -> None:
    if serves_stdio(sys.argv[1:]):
        registry = registry_option(sys.argv[1:])
        prefix = _attach(sys.argv[1:], registry)  # returns only if this launch serves its client itself
        from toolweave.server.fronts import early

        front = early.start(prefix)
        if registry and "://" not in registry:
            front.offer_ready_tools(os.path.expanduser(registry), early.DEFAULT_K)
            _rank_ready_table(registry)
        front.offer_starting_wait(_provisional_starting_wait(sys.argv[1:]))
    elif (address := serves_http(sys.argv[1:])) is not None:
        # the port listens from here on (a connection waits, never refused), and the handshake is
        # answered before the SDK is imported
        from toolweave.server.fronts import address as bound

        listening = bound.inherited()  # socket activation: bound before this process even started
        if listening is not None and (problem := bound.mismatch(listening, *address)) is not None:
            sys.stderr.write(f"error: {problem}\n")
            sys.exit(2)
        if listening is None:
            listening = bound.bind_now(*address)
        if listening is not None and "TOOLWEAVE_SHARED_KEY" in os.environ:
            _announce_shared(sys.argv[1:], listening.getsockname()[1])
        if listening is not None:  # else the command reports why it cannot listen, as it always did
            from toolweave.server.fronts import http_front

            started = http_front.start(listening)
            policy = _provisional_policy(sys.argv[1:], address[0])
            if policy is not None:  # answer the handshake and find_tools before the settings load
                started.offer(policy)
            registry = registry_option(sys.argv[1:])
            if policy is not None and registry and "://" not in registry:
                _rank_ready_table(registry)
    elif sys.argv[1:3] == ["hook", "claude-code"]:
        # the user waits for this one: no typer, no settings model (server/fronts/host.py)
        from toolweave.server.fronts.host import parse_hook_wait, run_claude_code_hook

        wait = parse_hook_wait(sys.argv[3:])
        if wait is not None:
            sys.exit(run_claude_code_hook(wait))
    from toolweave.cli import app

    app()


if __name__ == "__main__":
    main()
