"""The early front: `toolweave serve` (stdio) answers the handshake before the MCP SDK is imported.

Importing the SDK, typer and the settings model costs well over a second of CPU on a small machine, and
clients give a server a few seconds (docs/gateway.md "Startup"). So ``toolweave.__main__``
starts this front first, standard library only: a thread reads the client's first JSON-RPC lines from
fd 0 and answers, on fd 1,

* ``initialize`` (the handshake era's first request) at once, from ``server/handshake.py``;
* ``tools/list`` (no cursor) after ``initialize``, as soon as the command has loaded the settings and
  offered the answer (``offer_tools_list``): the meta-tools, exactly what the gateway lists before its
  registry is open.

The first message it does not answer (``server/discover`` of the 2026-07-28 era, a call, a cursor,
anything malformed) ends its part: it stops reading, and everything from there on is the SDK's. Then
``hand_over`` stops the thread and returns what was read: the answered requests, re-numbered with private
ids, followed by everything else verbatim. The SDK server reads that first (``Handover.reader``) and so
builds the same session state as if it had answered itself; its replies to the private ids are compared
with what was sent and dropped (``server/transports.py``).

Nothing is answered after the front stopped, and nothing but JSON-RPC is ever written to fd 1.
"""

from __future__ import annotations

import json
import logging
import os
import select
import threading
from dataclasses import dataclass, field
from typing import Any, BinaryIO

from toolweave.server.handshake import initialize_result, server_version

__all__ = ["EARLY_ID_PREFIX", "EarlyFront", "Handover", "claim", "start"]

log = logging.getLogger(__name__)

EARLY_ID_PREFIX = "io.toolweave/early-"
"""Replayed requests carry ids ``io.toolweave/early-<n>``: the SDK's replies to them are recognised by it."""

MAX_EARLY_LINE = 1 << 20
"""A first line longer than this is not parsed here: the SDK's bounded reader deals with it."""

_READ_CHUNK = 1 << 16


@dataclass
class Handover:
    """What the front read and answered, for the SDK server to continue from."""

    prefix: bytes
    """The lines the SDK must read before fd 0: answered requests (private ids) then the rest verbatim."""
    answered: dict[str, tuple[str, dict[str, Any]]] = field(default_factory=dict)
    """Private id -> (method, result sent to the client)."""

    def reader(self, rest: BinaryIO) -> _PrefixedLines:
        """A line reader over ``prefix`` then ``rest`` (the process's stdin)."""
        return _PrefixedLines(self.prefix, rest)


class _PrefixedLines:
    """``readline(limit)`` over a byte prefix, then a stream: what ``bounded_stdio_server`` reads."""

    def __init__(self, prefix: bytes, rest: BinaryIO) -> None:
        self._prefix = prefix
        self._rest = rest

    def readline(self, limit: int = -1) -> bytes:
        if not self._prefix:
            return self._rest.readline(limit)
        end = self._prefix.find(b"\n")
        size = len(self._prefix) if end < 0 else end + 1
        if limit >= 0:
            size = min(size, limit)
        line, self._prefix = self._prefix[:size], self._prefix[size:]
        if line.endswith(b"\n") or self._prefix or len(line) == limit:
            return line
        # the prefix ended inside a line: the rest of it is still in the pipe
        return line + self._rest.readline(-1 if limit < 0 else limit - len(line))


class EarlyFront:
    """Answers the first handshake messages on ``stdin_fd``/``stdout_fd`` from a thread (see above)."""

    def __init__(self, stdin_fd: int = 0, stdout_fd: int = 1) -> None:
        self._in = stdin_fd
        self._out = stdout_fd
        self._wake_read, self._wake_write = os.pipe()
        self._lock = threading.Condition()
        self._stopping = False
        self._tools_list: dict[str, Any] | None = None
        self._replay: list[bytes] = []
        self._answered: dict[str, tuple[str, dict[str, Any]]] = {}
        self._pending = b""  # read but not yet handled: a partial line, or everything after the front stopped
        self._initialized = False
        self._thread = threading.Thread(target=self._run, name="toolweave-early-front", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def offer_tools_list(self, result: dict[str, Any]) -> None:
        """From now on answer ``tools/list`` with ``result`` (a request already waiting gets it at once)."""
        with self._lock:
            self._tools_list = result
            self._lock.notify_all()

    def hand_over(self) -> Handover:
        """Stop answering (waits for the thread) and return what the SDK must read first."""
        with self._lock:
            self._stopping = True
            self._lock.notify_all()
        os.write(self._wake_write, b"x")
        self._thread.join()
        os.close(self._wake_read)
        os.close(self._wake_write)
        prefix = b"".join(line + b"\n" for line in self._replay) + self._pending
        return Handover(prefix, dict(self._answered))

    # -- the thread -----------------------------------------------------------------------------------
    def _run(self) -> None:
        try:
            version = server_version()
            while self._read_more():
                while (end := self._pending.find(b"\n")) >= 0:
                    line = self._pending[:end]
                    if not self._handle(line, version):
                        return  # the line stays in _pending: the SDK reads it
                    self._pending = self._pending[end + 1 :]
                if len(self._pending) > MAX_EARLY_LINE:
                    return
        except Exception:  # the SDK takes over from wherever this stopped: never fatal
            log.debug("the early front stopped", exc_info=True)

    def _read_more(self) -> bool:
        """Wait for input (or ``hand_over``); false when the front must stop reading."""
        if self._stopping:
            return False
        ready, _, _ = select.select([self._in, self._wake_read], [], [])
        if self._wake_read in ready or self._stopping:
            return False
        chunk = os.read(self._in, _READ_CHUNK)
        if not chunk:
            return False  # end of input: the SDK sees it too
        self._pending += chunk
        return True

    def _handle(self, line: bytes, version: str) -> bool:
        """Answer or keep one line; false when it is not one the front answers (the front stops)."""
        if not line.strip():
            self._replay.append(line)
            return True
        try:
            message = json.loads(line)
        except ValueError:
            return False
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            return False
        method, params = message.get("method"), message.get("params")
        if not self._initialized:
            if method != "initialize" or not _is_id(message.get("id")) or not _initialize_params(params):
                return False
            assert isinstance(params, dict)
            self._answer(message, initialize_result(params["protocolVersion"], version))
            self._initialized = True
            return True
        if method == "notifications/initialized" and "id" not in message:
            self._replay.append(line)
            return True
        if method == "tools/list" and _is_id(message.get("id")) and _no_cursor(params):
            result = self._wait_for_tools_list()
            if result is None:
                return False
            self._answer(message, result)
            return True
        return False

    def _wait_for_tools_list(self) -> dict[str, Any] | None:
        with self._lock:
            while self._tools_list is None and not self._stopping:
                self._lock.wait()
            return self._tools_list

    def _answer(self, request: dict[str, Any], result: dict[str, Any]) -> None:
        private = f"{EARLY_ID_PREFIX}{len(self._answered)}"
        reply = json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": result}, separators=(",", ":"))
        data = (reply + "\n").encode()
        while data:
            data = data[os.write(self._out, data) :]
        self._answered[private] = (request["method"], result)
        self._replay.append(json.dumps({**request, "id": private}).encode())


def _is_id(value: object) -> bool:
    return isinstance(value, int | str) and not isinstance(value, bool)


def _initialize_params(params: object) -> bool:
    """The shape the SDK accepts (anything else gets its error reply, so the SDK must answer)."""
    if not isinstance(params, dict):
        return False
    client = params.get("clientInfo")
    return (
        isinstance(params.get("protocolVersion"), str)
        and isinstance(params.get("capabilities"), dict)
        and isinstance(client, dict)
        and isinstance(client.get("name"), str)
        and isinstance(client.get("version"), str)
    )


def _no_cursor(params: object) -> bool:
    return params is None or (isinstance(params, dict) and params.get("cursor") is None)


_started: EarlyFront | None = None


def start() -> EarlyFront:
    """Start the process's early front on stdin/stdout (``toolweave.__main__``, before anything heavy)."""
    global _started
    _started = EarlyFront()
    _started.start()
    return _started


def claim() -> EarlyFront | None:
    """The early front this process started, once (``toolweave serve`` takes it over)."""
    global _started
    front, _started = _started, None
    return front
