"""The early front: `toolweave serve` (stdio) answers the handshake before the MCP SDK is imported.

Importing the SDK, typer and the settings model costs well over a second of CPU, many seconds on a busy
machine, and clients give a server little time: Claude Code 2.1 defers every tool of a server that has
not answered by its first model request. So ``toolweave.__main__`` starts this front first, standard
library only: a thread reads the client's JSON-RPC lines from fd 0 and answers, on fd 1, in either era
(the first request decides, as it does for the SDK):

* handshake era (``initialize`` first): ``initialize``, ``tools/list`` (no cursor) and ``ping``;
* 2026-07-28 era (a request carrying the ``_meta`` envelope first): ``server/discover``, ``tools/list``
  (no cursor), ``ping`` (the SDK's "method not found": it left the protocol) and the acknowledgement
  that opens a ``subscriptions/listen`` stream.

The answers come from ``server/fronts/handshake.py``, which the gateway's SDK server is built from too. The
tool list is the meta-tools', exactly what the gateway lists before its registry is open; until the
command has loaded the settings (``offer_tools_list``) it is the one the defaults give.

Everything else (a call, a cursor, anything malformed after the first request) is kept for the SDK, in
order, and the front goes on reading: a client that calls ``find_tools`` and then lists again is still
answered at once. A first message that decides no era ends the front's part. ``hand_over`` stops the
thread and returns what was read: the answered requests, re-numbered with private ids, the rest
verbatim, in the order they came. The SDK server reads that first (``Handover.reader``) and so builds
the same session state as if it had answered itself; its replies to the private ids, and its own
acknowledgement of a listen stream acknowledged here, are compared with what was sent and dropped
(``server/fronts/transports.py``). A listen request is replayed under its own id: the stream the client
opened is the one the SDK then serves.

Nothing is answered after the front stopped, and nothing but JSON-RPC is ever written to fd 1. When the
client closes stdin first, ``client_left`` says so, and ``left`` calls what ``toolweave serve`` armed it
with at that moment: while the gateway is being imported and built (nothing started yet), the process
ends at once rather than after the MCP SDK's import, seconds of CPU on a busy machine that a per-call
client's next launch needs.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import logging
import os
import select
import socket
import threading
import time
from collections.abc import Callable
from enum import Enum
from functools import partial
from typing import Any, Literal

from toolweave.server.fronts import early_turns, handshake
from toolweave.server.fronts.handover import EARLY_ID_PREFIX, Era, Handover
from toolweave.server.fronts.owed import Owed
from toolweave.server.turns import ready_index

__all__ = ["ARRIVED_META", "EARLY_ID_PREFIX", "EarlyFront", "claim", "stamped", "start"]

log = logging.getLogger(__name__)


ARRIVED_META = "io.toolweave/arrived"
"""``_meta`` key the front adds to a ``tools/call`` it keeps for the SDK: when it came (``time.monotonic``
of this process). A client counts its timeout from its sending, not from when the SDK took over: the
start-up bound (``server/turns/starting.py``) counts from here too."""

DEFAULT_K = 10
"""``retrieval.final_k``'s default: how many tools an answer names before the settings are loaded."""

STILL_STARTING = (
    "the gateway is still starting (opening its tool registry, loading its embedding model, connecting "
    "its upstreams): call find_tools again in a few seconds"
)
"""``server/turns/starting.py``'s note, word for word (a test keeps them equal)."""

OFFER_WAIT_S = 10.0
"""How long a ``find_tools`` that came before the settings were loaded waits for them here (then the SDK
answers it)."""

MAX_EARLY_LINE = 1 << 20
"""A line longer than this is not parsed here: the front stops and the SDK's bounded reader deals with it."""

_READ_CHUNK = 1 << 16


class _Action(Enum):
    ANSWERED = 1  # replayed under a private id
    KEPT = 2  # replayed verbatim: the SDK answers it
    ACKNOWLEDGED = 3  # a listen stream opened here, replayed verbatim: the SDK serves it
    STOP = 4  # left unread for the SDK, and the front stops


class ClientLeft:
    """Whether the client closed stdin, and what to do the moment it does (``arm``)."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self._lock = threading.Lock()
        self._on_left: Callable[[], None] | None = None

    def is_set(self) -> bool:
        return self._event.is_set()

    def set(self) -> None:
        self._event.set()
        with self._lock:
            if self._on_left is not None:
                self._on_left()

    def arm(self, on_left: Callable[[], None] | None) -> None:
        """Call ``on_left`` as soon as the client leaves (now, if it has), until ``arm(None)``. It runs under
        the lock: once ``arm(None)`` returned, no call is running or still to come."""
        with self._lock:
            self._on_left = on_left
            if on_left is not None and self._event.is_set():
                on_left()


class EarlyFront:
    """Answers the first handshake messages on ``stdin_fd``/``stdout_fd`` from a thread (see above)."""

    def __init__(
        self, stdin_fd: int = 0, stdout_fd: int = 1, *, host_channel: bool = False, prefix: bytes = b""
    ) -> None:
        """``host_channel``: also bind this process's host socket (``server/fronts/host.py``) at once.
        ``prefix``: what was already read of ``stdin_fd``; it is handled first."""
        self._in = stdin_fd
        self._out = stdout_fd
        self._wake_read, self._wake_write = os.pipe()
        self._lock = threading.Lock()
        self._stopping = False
        self.left = ClientLeft()
        """Whether the client closed stdin while the front was reading, and what to do the moment it does."""
        self._always_load = handshake.provisional_always_load()
        self._replay: list[bytes] = []
        self._answered: dict[str, tuple[str, dict[str, Any]]] = {}
        self._listens: dict[str | int, dict[str, Any]] = {}
        self._shown: dict[str, dict[str, Any]] = {}
        """Tools a ``find_tools`` answered here offered (by id, as ``tools/list`` shows them): the ones the
        gateway publishes when it takes the request over."""
        self._pending = (
            prefix  # read but not yet handled: a partial line, or everything after the front stopped
        )
        self._era: Era | None = None
        self._version = ""
        self._host_channel = host_channel
        self.host_socket: socket.socket | None = None
        """The host channel's socket, bound and listening from the start (``server/fronts/host.py``)."""
        self._host_path: str | None = None
        self._bound = threading.Event()
        self._ready_home: str | None = None
        self._ready_k = 10
        self._ready: ready_index.ReadyIndex | None = None
        self._ready_offered = threading.Event()
        self._ready_lock = threading.Lock()
        self._starting_wait_s = 0.0
        self._held = early_turns.Held(partial(write_all, self._out), self._lock)
        """``find_tools`` answers and host turns answered here, sent once the client has the tools they
        offer (``_answer_find``, ``_host_turn``)."""
        self._envelope: dict[str, Any] | None = None
        """The 2026-era client's ``_meta`` envelope: a host turn is replayed under it."""
        self._thread = threading.Thread(target=self._run, name="toolweave-early-front", daemon=True)

    def start(self) -> None:
        self._thread.start()
        if self._host_channel:
            atexit.register(self.close_host_socket)  # a gateway that never served (a bad manifest)

    def offer_tools_list(self, always_load: bool) -> None:
        """From now on answer ``tools/list`` as the loaded settings say (``publish.always_load``)."""
        with self._lock:
            self._always_load = always_load

    def offer_ready_tools(self, home: str | None, k: int) -> None:
        """From now on answer ``find_tools`` from the ready table of the registry at ``home`` (None: keep
        it for the SDK), with at most ``k`` tools (``server/turns/ready_index.py``). Until this is called, a
        ``find_tools`` waits for it (at most ``OFFER_WAIT_S``): the settings name the registry."""
        with self._ready_lock:
            if home != self._ready_home:
                self._ready = None  # another registry than the one named on the command line
            self._ready_home, self._ready_k = home, k
        self._ready_offered.set()

    def offer_starting_wait(self, seconds: float) -> None:
        """``startup_call_wait_s``: a plain ``find_tools`` the SDK has not taken over this long after it
        came is answered here, as still starting (``front_answers.still_starting``'s answer); 0: it
        waits for the SDK. For calls that come from now on."""
        with self._lock:
            self._starting_wait_s = seconds

    def offer_relist_bounds(self, wait_s: float, probe_s: float) -> None:
        """``publish.relist_wait_ms`` and ``relist_probe_ms``, in seconds, for answers held from now on."""
        with self._lock:
            self._held.relist_s = (wait_s, probe_s)

    def owed(self) -> int:
        """How many requests the front read and left for the SDK to answer: the client is owed their
        answers even once it closed stdin (``server/fronts/owed.py``)."""
        owed = Owed()
        with self._lock:
            for line in [*self._replay, *self._pending.split(b"\n")]:
                owed.asked(line)
        return len(owed)

    def close_host_socket(self) -> None:
        """Stop listening for host turns and remove the socket (the gateway will not serve)."""
        self._bound.wait(5)  # the thread binds it first thing
        listening, self.host_socket = self.host_socket, None
        if listening is not None:
            listening.close()
        if self._host_path is not None:
            with contextlib.suppress(OSError):
                os.unlink(self._host_path)
            self._host_path = None

    def hand_over(self) -> Handover:
        """Stop answering (waits for the thread) and return what the SDK must read first."""
        self._ready_offered.set()  # a find_tools still waiting for the settings is the SDK's now
        with self._lock:
            self._stopping = True
            self._held.release()  # before the SDK writes anything: the client gets every answer
        os.write(self._wake_write, b"x")
        self._thread.join()
        os.close(self._wake_read)
        os.close(self._wake_write)
        prefix = b"".join(line + b"\n" for line in self._replay) + self._pending
        return Handover(prefix, dict(self._answered), dict(self._listens), self._era)

    # -- the thread -----------------------------------------------------------------------------------
    def _run(self) -> None:
        try:
            if self._host_channel:
                from toolweave.server.fronts.host import listen_now

                self.host_socket = listen_now()
                self._host_path = self.host_socket.getsockname() if self.host_socket else None
        except Exception:  # the gateway runs without a host channel then, as host_channel would
            log.debug("no early host socket", exc_info=True)
        finally:
            self._bound.set()
        try:
            self._version = handshake.server_version()
            while True:  # what ``start`` was handed (``prefix``) is answered before anything is read
                while (end := self._pending.find(b"\n")) >= 0:
                    line = self._pending[:end]
                    # hand_over waits for a line being answered; and a kept line joins the replay
                    # under the same lock, before the still-starting timer ``_handle`` may have set
                    # can look for it there (a descheduled reader once left a find_tools unanswered)
                    with self._lock:
                        if self._stopping:
                            return
                        action = self._handle(line)
                        if action is _Action.KEPT:
                            self._replay.append(stamped(line))
                        elif action is _Action.ACKNOWLEDGED:
                            self._replay.append(line)
                    if action is _Action.STOP:
                        return  # the line stays in _pending: the SDK reads it
                    self._pending = self._pending[end + 1 :]
                if len(self._pending) > MAX_EARLY_LINE or not self._read_more():
                    return
        except Exception:  # the SDK takes over from wherever this stopped: never fatal
            log.debug("the early front stopped", exc_info=True)

    def _read_more(self) -> bool:
        """Wait for input, a host's turn it can answer (``_host_turn``) or ``hand_over``; false when the
        front must stop reading."""
        if self._stopping:
            return False
        host = self.host_socket if self._era is not None and self._table_now() is not None else None
        watched = [self._in, self._wake_read] + ([host.fileno()] if host is not None else [])
        ready, _, _ = select.select(watched, [], [])
        if self._wake_read in ready or self._stopping:
            return False
        if host is not None and host.fileno() in ready:
            with self._lock:
                if not self._stopping:
                    self._host_turn(host)
            if self._in not in ready:
                return True
        chunk = os.read(self._in, _READ_CHUNK)
        if not chunk:
            with self._lock:  # nobody is left to re-list: a held answer waits for nothing now
                self._held.release()
            self.left.set()
            return False  # end of input: the SDK sees it too
        self._pending += chunk
        return True

    def _handle(self, line: bytes) -> _Action:
        """Answer, keep or refuse one line (see the module docstring)."""
        if not line.strip():
            return _Action.KEPT
        try:
            message = json.loads(line)
        except ValueError:
            message = None
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            return _Action.KEPT if self._era is not None else _Action.STOP
        if self._era is None:
            return self._first(message)
        if self._era is Era.HANDSHAKE:
            return self._handshake_era(message)
        return self._modern_era(message)

    def _first(self, message: dict[str, Any]) -> _Action:
        """The first request decides the era, as it does for the SDK; one that decides none stops here."""
        params = message.get("params")
        if (
            message.get("method") == "initialize"
            and handshake.is_request_id(message.get("id"))
            and handshake.initialize_params_ok(params)
        ):
            assert isinstance(params, dict)
            self._era = Era.HANDSHAKE
            result = handshake.initialize_result(params["protocolVersion"], self._version)
            return self._answer(message, result)
        if handshake.envelope_version(params) is not None and handshake.is_request_id(message.get("id")):
            self._era = Era.MODERN
            action = self._modern_era(message)
            if action is _Action.KEPT:  # an enveloped request the front does not answer: the SDK's alone
                self._era = None
                return _Action.STOP
            return action
        return _Action.STOP

    def _handshake_era(self, message: dict[str, Any]) -> _Action:
        method, params = message.get("method"), message.get("params")
        if not handshake.is_request_id(message.get("id")) or handshake.envelope_version(params) is not None:
            return _Action.KEPT  # notifications (initialized, cancelled) and requests the SDK refuses
        if method == "tools/list" and handshake.without_cursor(params):
            listed = self._answer(message, self._with_shown(handshake.tools_list_result(self._always_load)))
            self._held.release(relisted=True)
            return listed
        if method == "ping" and (params is None or isinstance(params, dict)):
            return self._answer(message, {})
        if method == "tools/call" and (found := self._find_tools(params)) is not None:
            return self._answer_find(message, found)
        if method == "tools/call":
            self._answer_later(message)
        return _Action.KEPT

    def _modern_era(self, message: dict[str, Any]) -> _Action:
        method, params, request_id = message.get("method"), message.get("params"), message.get("id")
        if not handshake.is_request_id(request_id) or handshake.envelope_version(params) is None:
            return _Action.KEPT
        if self._envelope is None and isinstance(params, dict):
            self._envelope = params["_meta"]
        if method == "server/discover":
            return self._answer(message, handshake.discover_result(self._version))
        if method == "tools/list" and handshake.without_cursor(params):
            listed = handshake.modern_tools_list_result(self._always_load, self._version)
            answered = self._answer(message, self._with_shown(listed))
            self._held.release(relisted=True)
            return answered
        if method == "ping":
            return self._answer(message, handshake.modern_ping_error(), key="error")
        if method == "tools/call" and (found := self._find_tools(params)) is not None:
            return self._answer_find(message, handshake.modern_result(found, self._version))
        if method == "tools/call":
            self._answer_later(message)
        if method == "subscriptions/listen" and isinstance(request_id, str | int):
            if request_id in self._listens:
                return _Action.KEPT  # the same id twice: the SDK answers the second
            ack = handshake.listen_acknowledgement(request_id, params)
            if ack is None:
                return _Action.KEPT
            self._write({"jsonrpc": "2.0", "method": handshake.LISTEN_ACKNOWLEDGED, "params": ack})
            self._listens[request_id] = ack
            return _Action.ACKNOWLEDGED
        return _Action.KEPT

    def _table_now(self) -> ready_index.ReadyIndex | None:
        """The ready table, if the settings named one already and it exists (loaded once)."""
        with self._ready_lock:
            home, table = self._ready_home, self._ready
        if table is None and home is not None and self._ready_offered.is_set():
            table = ready_index.load(home)
            with self._ready_lock:
                if self._ready_home == home:
                    self._ready = table
        return table

    def _host_turn(self, listening: socket.socket) -> None:
        """A host's turn, answered from the ready table (``early_turns``; under the lock): shown to the
        client and replayed into the gateway as a ``find_tools`` (under the client's envelope in the
        2026 era), and answered once the client re-listed, as a ``find_tools`` answer here is held."""
        try:
            conn, _ = listening.accept()
        except OSError:  # the host left already
            return
        text, problem = early_turns.read_turn(conn)
        call = {"name": "find_tools", "arguments": {"query": (text or "")[: ready_index.MAX_QUERY_CHARS]}}
        found = self._find_tools(call) if text is not None and text.strip() else None
        if found is None:
            early_turns.reply(conn, {"ok": False, "error": problem or "nothing to search for"})
            return
        params = call if self._era is Era.HANDSHAKE else {**call, "_meta": self._envelope or {}}
        request = {"jsonrpc": "2.0", "id": "host-turn", "method": "tools/call", "params": params}
        if self._era is Era.MODERN:
            found = handshake.modern_result(found, self._version)
        self._answer(request, found, to=None)  # the answer goes to the host, not to the client
        doc = found["structuredContent"]
        found_names = [t["name"] for t in doc["tools"]]
        # as the gateway answers a host (docs/gateway.md, "The host channel"); the session has no key yet
        session = {"session": None, "tool_list_changed": doc["tool_list_changed"], "found": found_names}
        answer = {"ok": True, "sessions": [session]}
        if not self._announce(found):
            early_turns.reply(conn, answer)
            return
        self._held.turns.append((conn, answer))

    def _find_tools(self, params: object) -> dict[str, Any] | None:
        """The ``find_tools`` result from the ready table, or None (not a plain ``find_tools``, no table):
        the SDK answers it. Answered here, it is still replayed: the gateway publishes what it found."""
        plain = ready_index.plain_find_query(params)
        if plain is None or not self._ready_offered.wait(OFFER_WAIT_S):
            return None
        query, k = plain
        table = self._table_now()
        if table is None:
            return None  # no registry named, or no table: the SDK answers
        doc, ids = table.answer(query, k or self._ready_k)
        # what the gateway publishes as it takes the request over, shown by tools/list from now on (as
        # the gateway shows it while its registry opens), so a client that re-lists on list_changed sees
        # it at once rather than when the SDK has loaded, seconds later on a busy machine
        offered = [tool_id for tool_id in ids if tool_id not in self._shown]
        for tool_id, entry in zip(ids, doc["tools"], strict=True):
            if tool_id in offered:
                self._shown[tool_id] = handshake.listed_ready_tool(
                    entry, self._always_load, table.listed(tool_id)
                )
        doc["tool_list_changed"] = bool(offered)
        return ready_index.call_result(doc)

    def _with_shown(self, result: dict[str, Any]) -> dict[str, Any]:
        """A ``tools/list`` result with the tools a ``find_tools`` answered here offered."""
        return {**result, "tools": [*result["tools"], *self._shown.values()]} if self._shown else result

    def _answer_find(self, request: dict[str, Any], result: dict[str, Any]) -> _Action:
        """A ``find_tools`` answered here. When it offered new tools, ``list_changed`` goes first, on the
        connection (handshake era) or on each listen stream (2026 era), and the answer is held until the
        client's next ``tools/list`` was answered, within a bound (``early_turns.Held``), as the gateway
        holds its own (``server/turns/notify.py``): a client that sends its next model
        request as soon as it has the answer (Claude Code does) then offers the model the found tools
        rather than the list it had. A 2026-era client without a listen stream hears no notice."""
        return self._answer(request, result, to="held" if self._announce(result) else "client")

    def _announce(self, result: dict[str, Any]) -> bool:
        """``list_changed`` for an answer that offered new tools, where the client hears it; whether its
        answer is held now (``early_turns.Held``): not when nothing is new, heard or bounded."""
        if not result["structuredContent"]["tool_list_changed"]:
            return False
        method = "notifications/tools/list_changed"
        notices: list[dict[str, Any]]
        if self._era is Era.HANDSHAKE:
            notices = [{"jsonrpc": "2.0", "method": method}]
        else:  # heard on the listen streams only
            metas = [{handshake.SUBSCRIPTION_ID_META: sid} for sid in self._listens]
            notices = [{"jsonrpc": "2.0", "method": method, "params": {"_meta": m}} for m in metas]
        for notice in notices:
            self._write(notice)
        return bool(notices) and self._held.start(known=self._era is Era.MODERN)

    def _answer_later(self, request: dict[str, Any]) -> None:
        """A plain ``find_tools`` kept for the SDK: answered as still starting if the SDK has not taken
        over ``starting_wait_s`` from now (under the lock: called from ``_handle``). On a machine whose
        cores are busy, importing the SDK can outlast a client's timeout (the OpenAI Agents SDK's 5 s),
        and the gateway's own bound only counts once it runs."""
        if not self._starting_wait_s or ready_index.plain_find_query(request.get("params")) is None:
            return
        timer = threading.Timer(self._starting_wait_s, self._still_starting, (request,))
        timer.daemon = True
        timer.start()

    def _still_starting(self, request: dict[str, Any]) -> None:
        with self._lock:
            if self._stopping:
                return  # the SDK has it: it answers
            request_id = request["id"]
            kept = [line for line in self._replay if _call_id(line) == request_id]
            if not kept:
                return
            self._replay.remove(kept[0])  # answered here: nothing is searched or published
            doc = {"tools": [], "tool_list_changed": False, "note": STILL_STARTING}
            found = ready_index.call_result(doc)
            result = found if self._era is Era.HANDSHAKE else handshake.modern_result(found, self._version)
            self._write({"jsonrpc": "2.0", "id": request_id, "result": result})

    def _answer(
        self,
        request: dict[str, Any],
        payload: dict[str, Any],
        key: str = "result",
        *,
        to: Literal["client", "held"] | None = "client",
    ) -> _Action:
        """Answer ``request`` (now, once the client re-listed, or nowhere: a host's turn) and replay it
        under a private id (the SDK's reply to it is dropped)."""
        reply = {"jsonrpc": "2.0", "id": request["id"], key: payload}
        if to == "client":
            self._write(reply)
        elif to == "held":
            self._held.lines.append(_line(reply))
        private = f"{EARLY_ID_PREFIX}{len(self._answered)}"
        self._answered[private] = (request["method"], {key: payload})
        self._replay.append(json.dumps({**request, "id": private}).encode())
        return _Action.ANSWERED

    def _write(self, message: dict[str, Any]) -> None:
        write_all(self._out, _line(message))


def write_all(fd: int, data: bytes) -> None:
    while data:
        data = data[os.write(fd, data) :]


def _line(message: dict[str, Any]) -> bytes:
    return (json.dumps(message, separators=(",", ":")) + "\n").encode()


def _call_id(line: bytes) -> object:
    """The id of the ``tools/call`` request ``line`` holds, or None."""
    try:
        message = json.loads(line)
    except ValueError:
        return None
    if not isinstance(message, dict) or message.get("method") != "tools/call":
        return None
    return message.get("id")


def stamped(line: bytes, at: float | None = None) -> bytes:
    """``line``, or the ``tools/call`` request it holds with its arrival time in ``_meta`` (``at``, else
    now; ``time.monotonic``). Also the HTTP front's, for a call that waits for the gateway's app."""
    if b"tools/call" not in line:
        return line
    try:
        message = json.loads(line)
    except ValueError:
        return line
    if not isinstance(message, dict) or message.get("method") != "tools/call" or "id" not in message:
        return line
    params = message.get("params", {})
    meta = params.get("_meta", {}) if isinstance(params, dict) else None
    if not isinstance(meta, dict):
        return line
    stamped = {
        **message,
        "params": {**params, "_meta": {**meta, ARRIVED_META: time.monotonic() if at is None else at}},
    }
    return json.dumps(stamped).encode()


_started: EarlyFront | None = None


def start(prefix: bytes = b"") -> EarlyFront:
    """Start the process's early front on stdin/stdout (``toolweave.__main__``, before anything heavy).
    ``prefix``: what was already read of stdin (``server/fronts/bridge.py`` looked at the first line)."""
    global _started
    _started = EarlyFront(host_channel=True, prefix=prefix)
    _started.start()
    return _started


def claim() -> EarlyFront | None:
    """The early front this process started, once (``toolweave serve`` takes it over)."""
    global _started
    front, _started = _started, None
    return front
