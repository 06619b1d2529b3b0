"""`toolweave turn` and `toolweave hook claude-code`: hosts tell a running gateway the user's turn.

See ``toolweave/server/fronts/host.py`` for how a stdio gateway is found (a socket named by the host process
that spawned it) and ``docs/clients.md`` for the Claude Code hook configuration.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Annotated, Any
from urllib.parse import urlsplit

import typer

from toolweave.commands.options import user_errors
from toolweave.server.fronts.host import CONNECT_RETRY_S, HOOK_WAIT_S

__all__ = ["register"]

TURN_TIMEOUT_S = 30.0
"""``toolweave turn`` waits this long for a gateway's answer."""

hook_app = typer.Typer(help="Hooks for hosts that own the conversation (they report each user turn).")


def _post_turn(url: str, text: str, session: str | None, timeout_s: float) -> dict[str, Any]:
    from toolweave.errors import ServerError
    from toolweave.server.fronts.host import TURN_PATH

    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ServerError(f"--url: expected the gateway's http://HOST:PORT address, got {url!r}")
    body: dict[str, Any] = {"turn": text, **({"session": session} if session else {})}
    request = urllib.request.Request(
        f"{parts.scheme}://{parts.netloc}{TURN_PATH}",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            return dict(json.loads(response.read()))
    except urllib.error.HTTPError as exc:
        try:
            return dict(json.loads(exc.read()))
        except (json.JSONDecodeError, ValueError):
            raise ServerError(f"{url}: HTTP {exc.code}") from exc
    except (urllib.error.URLError, OSError) as exc:
        raise ServerError(f"cannot reach a gateway at {url}: {exc}") from exc


def turn_command(
    text: Annotated[str, typer.Argument(help="The user's turn (prompt), as the host received it.")],
    url: Annotated[
        str | None,
        typer.Option(
            "--url",
            help="An HTTP gateway (http://127.0.0.1:8765); default: the stdio gateway "
            "spawned by one of this process's ancestors.",
        ),
    ] = None,
    session: Annotated[
        str | None,
        typer.Option(
            "--session", help="Only this session: an Mcp-Session-Id or an io.toolweave/session value."
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the gateway's JSON answer.")] = False,
) -> None:
    """Tell a running gateway the user's turn: it publishes the tools the conversation needs now and
    notifies its clients before their next request."""
    with user_errors():
        from toolweave.errors import ServerError
        from toolweave.server.fronts.host import find_host_sockets, send_turn

        if url is not None:
            answers = [_post_turn(url, text, session, TURN_TIMEOUT_S)]
        else:
            sockets = find_host_sockets()
            if not sockets:
                raise ServerError(
                    "no gateway found: none was spawned by this process's ancestors (use --url)"
                )
            answers = [
                send_turn(path, text, session=session, timeout_s=TURN_TIMEOUT_S, connect_s=CONNECT_RETRY_S)
                for path in sockets
            ]
        for answer in answers:
            if not answer.get("ok"):
                raise ServerError(f"the gateway refused the turn: {answer.get('error')}")
        if as_json:
            typer.echo(json.dumps(answers if len(answers) > 1 else answers[0], indent=2))
            return
        for answer in answers:
            for entry in answer.get("sessions", []):
                changed = "published" if entry.get("tool_list_changed") else "unchanged"
                typer.echo(
                    f"{entry['session']}: {changed}: {', '.join(entry.get('found', [])) or '(no tool)'}"
                )


@hook_app.command("claude-code")
def claude_code_hook(
    wait: Annotated[
        float,
        typer.Option(
            "--wait",
            min=0.0,
            help="Return within this many seconds, whatever the gateway is doing (it keeps the prompt).",
        ),
    ] = HOOK_WAIT_S,
) -> None:
    """Claude Code ``UserPromptSubmit`` hook: reads the hook JSON on stdin and hands the prompt to this
    Claude Code session's gateway. Always exits 0 and prints nothing: the prompt goes on regardless."""
    from toolweave.server.fronts.host import run_claude_code_hook

    raise typer.Exit(run_claude_code_hook(wait))


def register(app: typer.Typer) -> None:
    """Add this module's commands to the ``toolweave`` app (called by ``toolweave.cli``)."""
    app.add_typer(hook_app, name="hook")
    app.command("turn")(turn_command)
