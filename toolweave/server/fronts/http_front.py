"""The early front for streamable HTTP: the port listens from the process's first moment, and the
handshake is answered before the MCP SDK is imported.

Without it, ``toolweave serve --transport http`` imported typer, the settings model and the MCP SDK and
built the gateway before it even bound its port: 0.7 s on a quiet 2-core machine, 3-4 s with its cores
busy, during which a client's connection was refused. Claude Code 2.1 builds its first model request
without waiting for its MCP servers, and defers every tool of one that has not answered by then.

So ``toolweave.__main__`` binds and listens on the socket first thing (``start``: a connection made now
waits in the backlog, never refused) and starts this front in a thread: uvicorn (light to import) serving
``HttpFront`` as its ASGI app. Once ``toolweave serve`` has loaded the settings (``offer``), the front
answers, in the era the request names, exactly what ``server/fronts/handshake.py`` says the gateway answers
before its registry is open:

* handshake era: ``initialize`` (a new ``Mcp-Session-Id``), then on that session
  ``notifications/initialized``, ``tools/list`` (no cursor) and ``ping``;
* 2026-07-28 era: ``server/discover``, ``tools/list`` (no cursor), ``ping`` (the SDK's "method not found")
  and the acknowledgement that opens a ``subscriptions/listen`` stream.

Which requests those are is decided in ``server/fronts/front_answers.py``. Everything else waits, unread past
its body, for the gateway's own app: a call, a cursor, a GET stream, anything the front does not fully
understand (headers, body, Host or Origin it would not vouch for) and every request while
authentication is configured (the front has no credentials to check: it answers only what the full app
would answer without any). ``attach`` hands the full app over: its lifespan is
entered here (the gateway starts), the requests the front answered are replayed into it in the order
they came, so it holds the same sessions as if it had answered them itself (a handshake-era session
gets its SDK session, and the front's session id is mapped to it on every later request and reply; a
2026-era ``server/discover`` begins the client process, ``server/fronts/processes.py``, on the same
connection), and then every waiting request goes on to it. A listen stream the front acknowledged is
continued by the full app on the same response, minus its second acknowledgement. From then on the front only
passes requests on.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from toolweave.server.fronts import handshake
from toolweave.server.fronts.early import stamped
from toolweave.server.fronts.front_answers import (
    SESSION_HEADER,
    Decision,
    FrontPolicy,
    decide,
    header_lists,
    one_header,
    still_starting,
)
from toolweave.server.fronts.front_offers import LIST_CHANGED, FrontClient, Offers, until_listed
from toolweave.server.fronts.http_wire import (
    SSE_HEADERS,
    Ending,
    Message,
    Receive,
    Replayed,
    Scope,
    Send,
    announcing,
    continuing,
    renaming,
    replies,
    respond,
    sse_event,
    with_header,
)
from toolweave.server.fronts.processes import KEEP_ALIVE_S
from toolweave.server.fronts.shutdown import STOPPING

__all__ = ["GRACEFUL_SHUTDOWN_S", "HttpFront", "claim", "start", "started"]

log = logging.getLogger(__name__)

App = Callable[[Scope, Receive, Send], Awaitable[None]]

GRACEFUL_SHUTDOWN_S = 1
"""On SIGTERM or Ctrl-C, how long open requests get before they are cancelled. Each handshake-era
session holds a GET stream that never ends by itself: without a bound, uvicorn waits for every
client to hang up before it even stops the upstreams."""

MAX_FRONT_BODY = 1 << 20
"""A longer body is not read here: the full app reads the rest (and applies its own limit)."""


@dataclass
class _Answered:
    """A request the front answered, to replay into the full app (``reply``: what the client got)."""

    scope: Scope
    body: bytes
    method: str
    request_id: Any
    reply: dict[str, Any]
    session: str | None = None
    """The front's ``Mcp-Session-Id`` (handshake era)."""
    client: FrontClient | None = None


class HttpFront:
    """The ASGI app uvicorn serves from the start (see the module docstring)."""

    def __init__(self, listening: socket.socket) -> None:
        self._socket = listening
        self._policy: FrontPolicy | None = None
        self._answered: list[_Answered] = []
        self._sessions: dict[str, str | None] = {}
        """The front's handshake-era session ids -> the SDK's (None until replayed)."""
        self._offers = Offers()
        """What each client's ``find_tools`` answers here offered (``front_offers.py``)."""
        self._app: App | None = None
        self._lifespan: Callable[[], contextlib.AbstractAsyncContextManager[Any]] | None = None
        self._on_stop: Callable[[str], None] | None = None
        self._handing_over = False
        self.failed: BaseException | None = None
        """What stopped the full app from starting (the command reports it)."""
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: Any = None
        self._running = threading.Event()
        self.serving = threading.Event()
        """Set once the full app has taken over (a shared gateway then announces itself)."""
        self._open_requests = 0
        self._last_request = time.monotonic()
        self._thread = threading.Thread(target=self._run, name="toolweave-http-front", daemon=True)
        # created in the loop's thread (``_run``)
        self._offered: asyncio.Event
        self._attached: asyncio.Event
        self._ready: asyncio.Event

    # -- the main thread's side ----------------------------------------------------------------------
    def start(self) -> None:
        self._thread.start()

    def offer(self, policy: FrontPolicy | None) -> None:
        """The settings are loaded: answer as ``policy`` says from now on (None: answer nothing, e.g.
        authentication is configured)."""
        self._policy = policy
        self._call(lambda: self._offered.set())

    def attach(
        self,
        app: App,
        lifespan: Callable[[], contextlib.AbstractAsyncContextManager[Any]],
        on_stop: Callable[[str], None] | None = None,
    ) -> None:
        """Hand over to the full app: its lifespan is entered in the server's loop, then it takes over."""
        self._app, self._lifespan, self._on_stop = app, lifespan, on_stop
        self._call(lambda: self._attached.set())

    def usable(self) -> bool:
        """Whether the front's server runs (it may have failed to start, e.g. to import uvicorn)."""
        self._running.wait()  # set once the thread has its server, or has failed to get one
        return self._loop is not None and self.failed is None

    def release(self) -> None:
        """Stop the front's server and free the port (the command then serves without a front)."""
        self._running.wait()
        if self._server is not None:
            # not ``handle_exit``: sse-starlette patches it to end every SSE response of the process
            self._server.should_exit = True
        self.wait()
        self._socket.close()

    def stop(self, sig: int) -> None:
        """Stop serving: signal ``sig`` came (the main thread's handler calls this; a second Ctrl-C
        stops at once, as uvicorn's own handler would)."""
        self._running.wait(10)
        server = self._server
        if server is not None and self._loop is not None:
            if self._on_stop is not None:
                self._on_stop(f"signal {sig}")
            self._loop.call_soon_threadsafe(server.handle_exit, sig, None)

    def wait(self) -> None:
        """Until the server stopped (in short joins: the main thread's signal handlers run meanwhile)."""
        while self._thread.is_alive():
            self._thread.join(0.25)

    @property
    def port(self) -> int:
        """The port the front serves."""
        return int(self._socket.getsockname()[1])

    def idle_for(self) -> float | None:
        """Seconds since the last request ended; None while one is open (a session's GET stream too)."""
        if self._open_requests:
            return None
        return time.monotonic() - self._last_request

    def _call(self, callback: Callable[[], None]) -> None:
        self._running.wait()
        if self._loop is not None:
            self._loop.call_soon_threadsafe(callback)

    # -- the server's thread -------------------------------------------------------------------------
    def _run(self) -> None:
        try:
            import uvicorn

            loop = _new_loop()
            asyncio.set_event_loop(loop)
            self._offered, self._attached, self._ready = asyncio.Event(), asyncio.Event(), asyncio.Event()
            # No access log: uvicorn formats each line's address and path before the logger drops it.
            config = uvicorn.Config(
                self,
                interface="asgi3",
                ws="none",  # no websockets library to import: MCP needs none
                log_level="warning",
                lifespan="on",
                access_log=False,
                timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S,
                timeout_keep_alive=int(KEEP_ALIVE_S),  # an idle connection's port names it this long
            )
            self._server = uvicorn.Server(config)
            logging.getLogger("uvicorn.error").addFilter(_ExpectedAtStop())
            self._loop = loop
        except BaseException as exc:  # the command then serves without the front
            self.failed = exc
            log.warning("no early HTTP front: %s", exc)
            return
        finally:
            self._running.set()
        try:
            loop.run_until_complete(self._server.serve(sockets=[self._socket]))
        except BaseException as exc:
            self.failed = self.failed or exc
            log.error("the HTTP server stopped: %s: %s", type(exc).__name__, exc)
        finally:
            loop.close()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._run_lifespan(receive, send)
            return
        self._open_requests += 1  # one loop, one thread: no lock needed
        try:
            await self._route(scope, receive, send)
        finally:
            self._open_requests -= 1
            self._last_request = time.monotonic()

    async def _route(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self._ready.is_set():
            await self._delegate(scope, receive, send)
        elif scope["type"] != "http":
            await self._wait_and_delegate(scope, receive, send)
        else:
            await self._early(scope, receive, send)

    async def _run_lifespan(self, receive: Receive, send: Send) -> None:
        await receive()  # lifespan.startup: serve at once, the full app starts once attached
        await send({"type": "lifespan.startup.complete"})
        shutdown = asyncio.ensure_future(receive())
        attached = asyncio.ensure_future(self._attached.wait())
        await asyncio.wait({shutdown, attached}, return_when=asyncio.FIRST_COMPLETED)
        attached.cancel()
        if self._attached.is_set() and not shutdown.done() and self._lifespan is not None:
            try:
                async with self._lifespan():
                    await self._hand_over()
                    await shutdown
            except BaseException as exc:  # a start-up failure: reported by the command, never a hang
                self.failed = exc
                self._ready.set()
                self._server.should_exit = True
                log.debug("the gateway's app failed", exc_info=True)
        self._ready.set()  # anything still waiting is answered by whatever the full app is now
        await shutdown
        await send({"type": "lifespan.shutdown.complete"})

    async def _hand_over(self) -> None:
        """Replay what the front answered, in order, then let every waiting request through."""
        self._handing_over = True
        log.info(
            "the gateway takes over from the HTTP front (%d answered requests to replay)", len(self._answered)
        )
        for entry in self._answered:
            try:
                await self._replay(entry)
            except Exception:  # one session's replay never keeps the others waiting
                log.exception("could not hand %s over to the gateway", entry.method)
        self._answered.clear()
        self._ready.set()
        self._last_request = time.monotonic()  # idle counts from here: start-up is not idleness
        self.serving.set()

    async def _replay(self, entry: _Answered) -> None:
        scope = entry.scope
        if entry.session is not None and entry.method != "initialize":
            sdk = self._sessions.get(entry.session)
            if sdk is None:
                return  # its initialize could not be replayed: later requests get the SDK's 404
            scope = with_header(scope, SESSION_HEADER, sdk.encode())
        status, headers, body = await self._exchange(scope, entry.body)
        if entry.method == "initialize" and entry.session is not None:
            self._sessions[entry.session] = headers.get("mcp-session-id")
        if entry.request_id is None:
            if status != 202:
                log.error("the gateway refused %s after the front accepted it: HTTP %d", entry.method, status)
            return
        got = next(
            (r for r in replies(body, headers.get("content-type", "")) if r.get("id") == entry.request_id),
            {},
        )
        reply = {key: got[key] for key in ("result", "error") if key in got}
        # A find_tools the front answered from the ready table: the gateway's own answer may rank or
        # publish otherwise, and so list otherwise than the front showed, once its registry is open.
        shown = entry.client is not None and self._offers.shown_to(entry.client)
        if shown and entry.client is not None and entry.method in ("tools/call", "tools/list"):
            if reply != entry.reply:
                self._offers.announce(entry.client)
                log.info(
                    "the gateway answers the replayed %s otherwise than the front did: list_changed follows",
                    entry.method,
                )
        elif reply != entry.reply and entry.method != "tools/call":
            log.error(
                "the early answer to %s differs from the gateway's: %s != %s",
                entry.method,
                entry.reply,
                reply,
            )

    async def _exchange(self, scope: Scope, body: bytes) -> tuple[int, dict[str, str], bytes]:
        """One request through the full app, its response collected (never reaches a client)."""
        assert self._app is not None
        answered = asyncio.Event()
        start: Message = {}
        chunks: list[bytes] = []

        async def receive() -> Message:
            await answered.wait()
            return {"type": "http.disconnect"}

        async def send(message: Message) -> None:
            if message["type"] == "http.response.start":
                start.update(message)
            elif message["type"] == "http.response.body":
                chunks.append(message.get("body", b""))
                if not message.get("more_body"):
                    answered.set()

        try:
            await self._app(scope, Replayed(body, receive), send)
        finally:
            answered.set()
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in start.get("headers", ())}
        return int(start.get("status", 0)), headers, b"".join(chunks)

    async def _delegate(self, scope: Scope, receive: Receive, send: Send) -> None:
        assert self._app is not None
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        if self._sessions:
            front = one_header(header_lists(scope), SESSION_HEADER)
            sdk = self._sessions.get(front) if front is not None else None
            if sdk is not None and front is not None:
                scope = with_header(scope, SESSION_HEADER, sdk.encode())
                send = renaming(send, sdk.encode(), front.encode())
                if scope.get("method") == "GET" and self._offers.on_get_stream(front):
                    send = announcing(send, sse_event({"jsonrpc": "2.0", "method": LIST_CHANGED}))
        ending = Ending(send)
        try:
            await self._app(scope, receive, ending)
        except asyncio.CancelledError:
            if not STOPPING.is_set():
                raise
            # uvicorn cancels what is still open once the graceful shutdown is over (GRACEFUL_SHUTDOWN_S):
            # streams that never end by themselves. Ended here, not logged as an ASGI exception each.
        await ending.finish()

    async def _wait_and_delegate(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self._ready.wait()
        if self._app is None or self.failed is not None:
            if scope["type"] == "http":
                await respond(send, 503, {"error": "the gateway could not start"})
            return
        await self._delegate(scope, receive, send)

    # -- answering before the hand-over ---------------------------------------------------------------
    async def _early(self, scope: Scope, receive: Receive, send: Send) -> None:
        arrived = time.monotonic()
        body, more = b"", True
        while more and len(body) <= MAX_FRONT_BODY:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client left before it finished sending
            body += message.get("body", b"")
            more = bool(message.get("more_body"))
        replay = Replayed(body, receive, more)
        if not more:
            offered = asyncio.ensure_future(self._offered.wait())
            ready = asyncio.ensure_future(self._ready.wait())
            await asyncio.wait({offered, ready}, return_when=asyncio.FIRST_COMPLETED)
            offered.cancel()
            ready.cancel()
            # neither answers once the gateway takes over (or failed to start): it answers
            if await self._answer(scope, body, replay, send) or await self._late(scope, body, arrived, send):
                return
            # a call waits for the gateway's app from here: its start-up bound counts from its arrival
            # (server/turns/starting.py), or a client's own timeout (5 s in some) would meet both waits
            call = stamped(body, arrived)
            if call is not body:
                scope = with_header(scope, b"content-length", str(len(call)).encode())
                replay = Replayed(call, receive)
        await self._wait_and_delegate(scope, replay, send)

    async def _answer(self, scope: Scope, body: bytes, receive: Receive, send: Send) -> bool:
        """Answer the request if the front can (``front_answers.decide``); False leaves it to the full app."""
        if self._policy is None or self._handing_over or self._ready.is_set():
            return False
        decision = decide(scope, body, self._policy, self._sessions)
        if decision is None:
            return False
        message = decision.message
        client = self._offers.client(scope, decision)
        if decision.listen is not None:
            await self._listen(scope, receive, send, decision.listen, client)
            return True
        decision, before = self._offers.answer(client, decision, self._policy.always_load)
        relist = None
        if self._policy.relist_wait_s > 0 and _offers_new_tools(decision):
            relist = self._offers.awaiting_list(client)  # before any other request runs: none is missed
        if decision.session is not None and decision.session not in self._sessions:
            self._sessions[decision.session] = None  # an initialize: mapped to the SDK's at the hand-over
        if decision.replay:  # recorded before anything is sent: a hand-over that begins meanwhile replays it
            reply = decision.reply or {}
            self._answered.append(
                _Answered(scope, body, message["method"], message.get("id"), reply, decision.session, client)
            )
        log.debug("the HTTP front answered %s", message.get("method"))
        payload = decision.payload()
        session = decision.session if payload else None
        if relist is not None:
            await until_listed(relist, self._ready, self._policy.relist_wait_s)
        await respond(send, decision.status, payload, session=session, before=before)
        if message.get("method") == "tools/list":
            self._offers.listed(client)
        return True

    async def _late(self, scope: Scope, body: bytes, arrived: float, send: Send) -> bool:
        """``front_answers.still_starting`` once ``starting_wait_s`` passed; False: the gateway answers."""
        policy = self._policy
        decision = None if policy is None else still_starting(scope, body, policy, self._sessions)
        if policy is None or decision is None:
            return False
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._ready.wait(), arrived + policy.starting_wait_s - time.monotonic())
        if self._ready.is_set() or self._handing_over:
            return False  # the gateway has it now: its own bound counts from the arrival
        await respond(send, decision.status, decision.payload(), session=decision.session)
        return True

    async def _listen(
        self, scope: Scope, receive: Receive, send: Send, ack: dict[str, Any], client: FrontClient
    ) -> None:
        """Open the listen stream now (its acknowledgement), carry the notices of what this client's
        answers here offered, and let the full app serve it from the hand-over on, on this same
        response."""
        await send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS})
        notice = {"jsonrpc": "2.0", "method": handshake.LISTEN_ACKNOWLEDGED, "params": ack}
        await send({"type": "http.response.body", "body": sse_event(notice), "more_body": True})
        sid = ack["_meta"][handshake.SUBSCRIPTION_ID_META]
        notices = self._offers.listening(client, sid)
        try:
            await self._carry(notices, send)
        finally:
            self._offers.ended(client, sid)
        if self._app is None or self.failed is not None:
            await send({"type": "http.response.body", "body": b"", "more_body": False})
            return
        await self._delegate(scope, receive, continuing(send, ack))

    async def _carry(self, notices: asyncio.Queue[dict[str, Any]], send: Send) -> None:
        """Send ``notices`` on a listen stream until the full app takes it over."""
        ready = asyncio.ensure_future(self._ready.wait())
        try:
            while not ready.done():
                got = asyncio.ensure_future(notices.get())
                try:
                    await asyncio.wait({ready, got}, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    got.cancel()  # nothing if it got one
                if got.done() and not got.cancelled():
                    await send(
                        {"type": "http.response.body", "body": sse_event(got.result()), "more_body": True}
                    )
            while not notices.empty():  # sent before the hand-over: still this stream's to carry
                notice = notices.get_nowait()
                await send({"type": "http.response.body", "body": sse_event(notice), "more_body": True})
        finally:
            ready.cancel()


class _ExpectedAtStop(logging.Filter):
    """Drops uvicorn's error that it cancelled the requests still open after the graceful shutdown: at a
    stop those are the sessions' streams, which never end by themselves (the stop's own line says it)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (STOPPING.is_set() and "graceful shutdown exceeded" in str(record.msg))


def _new_loop() -> asyncio.AbstractEventLoop:
    """uvloop when installed (a dependency: it roughly halves the event loop's share of a request)."""
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


_started: HttpFront | None = None


def start(listening: socket.socket) -> HttpFront:
    """Start the front on the port ``toolweave.__main__`` bound (``front_answers.bind_now``)."""
    global _started
    _started = HttpFront(listening)
    _started.start()
    return _started


def started() -> HttpFront | None:
    """The front this process started, if any, without claiming it."""
    return _started


def claim() -> HttpFront | None:
    """The front this process started, once (``toolweave serve`` takes it over)."""
    global _started
    front, _started = _started, None
    return front


def _offers_new_tools(decision: Decision) -> bool:
    """Whether ``decision`` is a ``find_tools`` answer that offered the client tools it was not shown."""
    result = (decision.reply or {}).get("result")
    structured = result.get("structuredContent") if isinstance(result, dict) else None
    return isinstance(structured, dict) and structured.get("tool_list_changed") is True
