"""A host's turn (``server/fronts/host.py``: the Claude Code prompt hook) read and answered by the early
stdio front while the gateway still loads (``server/fronts/early.py``). Standard library only.

Claude Code runs its ``UserPromptSubmit`` hook while it starts its MCP servers and sends its first model
request only once the hook returned, within its own 2 s budget. The gateway's host channel serves turns
once the MCP SDK is loaded, which on a busy machine is later than that: the hook gave up and the first
request carried no found tool. So the front answers the turn itself from the ready table, as it answers
``find_tools``: it shows the tools to that client (``list_changed``, then its ``tools/list``), replays
the turn into the gateway as a ``find_tools`` under a private id (the gateway publishes the same tools
into the session, and its reply is dropped), and answers the hook once the client re-listed.
"""

from __future__ import annotations

import json
import socket
from typing import Any

__all__ = ["READ_TIMEOUT_S", "read_turn", "reply"]

READ_TIMEOUT_S = 1.0
"""How long the front waits for a connected hook's one line (it sends it as it connects)."""

MAX_TURN_BYTES = 1 << 20


def read_turn(conn: socket.socket) -> tuple[str | None, str | None]:
    """The turn's text, or None with why it cannot be answered here (read from ``conn``, bounded)."""
    conn.settimeout(READ_TIMEOUT_S)
    data = b""
    try:
        while not data.endswith(b"\n") and len(data) <= MAX_TURN_BYTES:
            chunk = conn.recv(65536)
            if not chunk:
                break
            data += chunk
        request: Any = json.loads(data)
    except (OSError, ValueError):
        return None, "the request is not a JSON line"
    if not isinstance(request, dict) or not isinstance(request.get("turn"), str):
        return None, 'expected a JSON object with a string "turn"'
    if request.get("session") is not None:  # the gateway's own rules pick that session: not here
        return None, "the gateway is still starting: send a turn for a named session again shortly"
    return request["turn"], None


def reply(conn: socket.socket, answer: dict[str, Any]) -> None:
    """Send ``answer`` and close (a host that left is no error: the turn was applied)."""
    try:
        conn.settimeout(READ_TIMEOUT_S)
        conn.sendall(json.dumps(answer).encode() + b"\n")
    except OSError:
        pass
    finally:
        conn.close()
