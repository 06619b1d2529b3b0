"""The Claude Code ``UserPromptSubmit`` hook's body, standard library only.

Claude Code runs the hook before each model request and waits for it: every moment the hook takes is a
moment the user waits. ``toolweave.__main__`` therefore runs ``toolweave hook claude-code`` straight
from here, without importing typer and the settings model (``claude-code --help`` and bad options
still go through the CLI, ``commands/turn.py``). See ``server/host.py`` for how the hook finds the
gateway its own Claude Code process spawned.
"""

from __future__ import annotations

import json
import sys
import time

__all__ = ["CONNECT_RETRY_S", "HOOK_WAIT_S", "STARTING_WAIT_S", "parse_wait", "run_claude_code_hook"]

HOOK_WAIT_S = 20.0
"""The hook returns within this long (``--wait``), whatever the gateway is doing: well within the hook
timeout docs/clients.md gives Claude Code (30 s). Once the gateway runs, retrieval plus the client's
re-list (at most ``publish.relist_wait_ms``) take well under a second. The first prompt of a session
comes while the host is still starting the gateway (registry, upstreams, embedding model: 6-10 s on a
2-core machine at load 13, more when busier); the hook waits for it up to here, so that prompt's first
model request already has its tools, and otherwise returns: the gateway has the turn and applies it
when it can (the client then hears ``list_changed``)."""

CONNECT_RETRY_S = 2.0
"""A refused connection (a gateway binding its socket this instant) is tried again for this long."""

STARTING_WAIT_S = 5.0
"""How long the hook looks for the socket of a gateway its host is starting (a stdio gateway binds it
within its first second, before anything heavy is imported)."""


def parse_wait(args: list[str]) -> float | None:
    """``--wait SECONDS`` from the hook's arguments (default ``HOOK_WAIT_S``); None when they are not
    simply that (the CLI then parses them and says what is wrong)."""
    if not args:
        return HOOK_WAIT_S
    value = args[1] if len(args) == 2 and args[0] == "--wait" else None
    if len(args) == 1 and args[0].startswith("--wait="):
        value = args[0].split("=", 1)[1]
    try:
        wait = float(value) if value is not None else -1.0
    except ValueError:
        return None
    return wait if wait >= 0 else None


def run_claude_code_hook(wait: float) -> int:
    """Read the hook event on stdin, hand its prompt to this Claude Code session's gateway and return
    within ``wait`` seconds. Always 0, and nothing on stdout: the prompt goes on regardless."""
    deadline = time.monotonic() + wait
    try:
        event = json.loads(sys.stdin.read() or "{}")
        prompt = event.get("prompt") if isinstance(event, dict) else None
        if isinstance(prompt, str) and prompt.strip():
            from toolweave.server.host import find_host_sockets, send_turn

            # the host runs this hook while it still starts its MCP servers: look for ours (bounded)
            for path in find_host_sockets(wait_s=min(STARTING_WAIT_S, wait)):
                left = deadline - time.monotonic()
                try:
                    send_turn(path, prompt, timeout_s=max(0.1, left), connect_s=min(CONNECT_RETRY_S, left))
                except TimeoutError:  # handed over: the gateway applies it once it can
                    print(f"toolweave hook: {path.name}: still starting; it has the prompt", file=sys.stderr)
                except Exception as exc:  # one gateway down: the others still hear it
                    print(f"toolweave hook: {path.name}: {exc}", file=sys.stderr)
    except Exception as exc:  # never break the user's prompt
        print(f"toolweave hook: {exc}", file=sys.stderr)
    return 0
