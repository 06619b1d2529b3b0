"""What the early stdio front (``server/fronts/early.py``) holds until the client re-listed, and a host's
turn (``server/fronts/host.py``: the Claude Code prompt hook) it reads and answers while the gateway
still loads. Standard library only.

An answer that offered the client new tools goes once the client's next ``tools/list`` was answered,
within a bound (``Held``), as the gateway holds its own (``server/turns/notify.py``): Claude Code sends
its next model request as soon as it has the answer, with the tools it had listed by then.

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
import logging
import socket
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["READ_TIMEOUT_S", "RELIST_PROBE_S", "RELIST_WAIT_S", "Held", "read_turn", "reply"]

log = logging.getLogger(__name__)

RELIST_WAIT_S = 5.0
"""``publish.relist_wait_ms``'s default, in seconds: how long an answer that offered tools is held for a
client known to re-list (a 2026-era client with a listen stream, or one that re-listed here already)."""

RELIST_PROBE_S = 0.3
"""``publish.relist_probe_ms``'s default: the same bound while that is not known."""

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


class Held:
    """Answers held until the client re-listed, or a bound passed (the front's lock guards it all)."""

    def __init__(self, write: Callable[[bytes], None], lock: threading.Lock) -> None:
        self._write = write
        self._lock = lock
        self.relist_s = (RELIST_WAIT_S, RELIST_PROBE_S)
        """``publish.relist_wait_ms`` and ``relist_probe_ms``, in seconds (``offer_relist_bounds``)."""
        self.lines: list[bytes] = []
        """Answers for the client, as written."""
        self.turns: list[tuple[socket.socket, dict[str, Any]]] = []
        """Host turns' connections and their answers."""
        self._relisted = False

    def start(self, *, known: bool) -> bool:
        """Start the bound for an answer about to be held (``known``: the client re-lists, as a 2026-era
        one with a listen stream does); False when no bound is set (then it is not held)."""
        wait_s, probe_s = self.relist_s
        bound = wait_s if known or self._relisted else probe_s
        if bound <= 0:
            return False
        timer = threading.Timer(bound, self._bound_passed)
        timer.daemon = True
        timer.start()
        return True

    def release(self, *, relisted: bool = False) -> None:
        """Send what is held (under the front's lock); ``relisted``: a list reply was just written."""
        if relisted and (self.lines or self.turns):
            self._relisted = True
        turns, self.turns = self.turns, []
        for conn, answer in turns:
            reply(conn, answer)
        lines, self.lines = self.lines, []
        try:
            for data in lines:
                self._write(data)
        except OSError:  # the client left: nobody to answer (the reader sees the end of its input)
            log.debug("a held find_tools answer found no client", exc_info=True)

    def _bound_passed(self) -> None:
        with self._lock:
            self.release()
