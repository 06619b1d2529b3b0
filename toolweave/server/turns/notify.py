"""``notifications/tools/list_changed`` to ONE session, in both protocol eras.

* Handshake era: the session's connection has a standalone channel (stdio pipe, the SSE stream, the
  streamable-HTTP GET stream); ``connection.send_tool_list_changed()`` writes there, best effort. On
  streamable HTTP that channel is only a wire while the client holds its GET stream open: without an
  event store the SDK drops what is sent meanwhile, so such a session cannot hear a notice either
  (``streamable_http_reach``).
* 2026-07-28 era: notices travel only on ``subscriptions/listen`` streams, and the SDK's
  ``InMemorySubscriptionBus`` fans every event out to every stream. To target one session, the
  gateway's listen handler keeps one bus (and one SDK ``ListenHandler``) per session key: a listen
  request is attached to the bus of the session it comes from, so publishing on that bus reaches that
  client's streams and nobody else's. Same session key rules as everything else (``sessions.py``).

**Holding an answer until the client has the tools it names.** A ``find_tools`` answer that published
tools is held (``Notifier.hold``) until a list reply holding them was *written* to the client: not when
the re-list request arrives (its reply is not built yet, and the held answer could overtake it), not
after a fixed wait. The transport says when a reply was written (``WrittenReplies``): on stdio the
reply has been taken by the pipe's writer, which writes it before anything sent later
(``reporting_written``); on streamable HTTP the request that carried the ``tools/list`` has sent its
response (``json_answers.ReportingWritten``), and the answer, which goes on another connection, waits
``OTHER_CONNECTION_SETTLE_S`` more. A transport that cannot tell (the legacy SSE transport,
in-process clients) counts a reply as written when its handler built it. The hold is bounded: by
``publish.relist_wait_ms`` (5 s) for a client known to re-list, by ``publish.relist_probe_ms`` (300 ms)
while that is not known, as some clients give a request 5 s in all; a client that cannot hear the
notice, or let one go unanswered within the bound, is not held at all.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Callable, Collection, Iterable, Iterator, MutableMapping
from contextlib import asynccontextmanager, contextmanager, suppress
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

import anyio
import mcp_types as types
from mcp.server import ServerRequestContext
from mcp.server.streamable_http import GET_STREAM_KEY
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ToolsListChanged
from mcp.shared._context_streams import create_context_streams
from mcp.shared.message import SessionMessage

from toolweave.server.fronts.auth import identity_of_request
from toolweave.server.sessions.session_book import Session, session_key

__all__ = [
    "OTHER_CONNECTION_SETTLE_S",
    "Notifier",
    "WrittenReplies",
    "reporting_written",
    "streamable_http_reach",
]

log = logging.getLogger(__name__)


UNREPORTED_SETTLE_S = 0.005
"""On a transport that does not say when a reply was written, a held answer goes this much after the
list reply was built (it is written as soon as its handler returns)."""
OTHER_CONNECTION_SETTLE_S = 0.01
"""Over HTTP the list reply and the answer go out on two connections: a client that gets both at once
may read the answer first (the Python SDK did, 1 run in 3 on this loaded machine), so the answer goes
this much after the list reply was sent."""


def _now() -> str:
    """A wall-clock stamp for the re-list trace lines (bench/claude_code_turns.py ``--trace`` merges them
    with the client's side)."""
    return f"t={time.time():.3f}"


@dataclass
class WrittenReplies:
    """Says when replies were written to one client: by request id on a wire that carries many
    (``written``, stdio), or all at once when an HTTP request's response was sent (``all_written``).
    Handlers find it with ``WrittenReplies.of(request)``: on stdio, requests read while it was
    ``reporting()`` carry it in their context; an HTTP request carries it in its ASGI scope
    (``in_scope``: the SDK runs an HTTP request's handler in the session's task, not the request's)."""

    settle_s: float = 0.0
    """How long an answer released by a reply written here waits still: 0 on a wire that carries the
    answer too (stdio: written in order); ``OTHER_CONNECTION_SETTLE_S`` over HTTP."""
    _after: dict[Any, list[Callable[[], None]]] = field(default_factory=dict)

    @staticmethod
    def of(request: Any = None) -> WrittenReplies | None:
        """The replies of the wire ``request`` came from (None: it cannot tell)."""
        replies = _replies.get()
        if replies is None and request is not None:
            state = getattr(request, "scope", {}).get("state")
            replies = state.get(_SCOPE_KEY) if isinstance(state, dict) else None
        return replies if isinstance(replies, WrittenReplies) else None

    @contextmanager
    def reporting(self) -> Iterator[None]:
        """Requests read from now on, in this context, report their replies to this object."""
        token = _replies.set(self)
        try:
            yield
        finally:
            _replies.reset(token)

    def in_scope(self, scope: MutableMapping[str, Any]) -> None:
        """The request of ASGI ``scope`` reports its replies to this object."""
        scope.setdefault("state", {})[_SCOPE_KEY] = self

    def after(self, request_id: Any, callback: Callable[[], None]) -> None:
        self._after.setdefault(request_id, []).append(callback)

    def written(self, request_id: Any) -> None:
        for callback in self._after.pop(request_id, ()):
            callback()

    def all_written(self) -> None:
        for request_id in list(self._after):
            self.written(request_id)


_replies: ContextVar[WrittenReplies | None] = ContextVar("toolweave_written_replies", default=None)
_SCOPE_KEY = "toolweave.written_replies"


@asynccontextmanager
async def reporting_written(write: Any, replies: WrittenReplies) -> AsyncIterator[Any]:
    """``write`` (a wire's outgoing stream with no buffer, as the SDK's stdio writer has), reporting each
    reply to ``replies`` once the wire's writer took it: it writes it before anything sent later."""
    send, receive = create_context_streams[SessionMessage](0)

    async def relay() -> None:
        with suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):  # the client left
            async with receive:
                async for item in receive:
                    await write.send(item)
                    message = item.message
                    if isinstance(message, types.JSONRPCResponse | types.JSONRPCError):
                        replies.written(message.id)

    async with anyio.create_task_group() as tg:
        tg.start_soon(relay)
        async with send:
            yield send


@dataclass
class _Listeners:
    bus: InMemorySubscriptionBus
    handler: ListenHandler
    streams: int = 0


class Notifier:
    """Serves ``subscriptions/listen`` per session and sends list_changed to chosen sessions."""

    def __init__(self) -> None:
        self._by_key: dict[str, _Listeners] = {}
        self.channel_open: Callable[[Any], bool | None] | None = None
        """Whether a handshake-era connection's standalone channel is open now (None: unknown, taken
        as open). Set by the streamable-HTTP transport (``streamable_http_reach``)."""
        self.lists_ended = False
        """The one client's input ended (stdio): it re-lists no more, so no answer is held for it."""

    def input_ended(self, sessions: Iterable[Session]) -> None:
        """A stdio client's input ended: from now on no answer is held, and the held ones go now."""
        self.lists_ended = True
        for session in list(sessions):
            session.input_ended()

    async def listen(
        self, ctx: ServerRequestContext[Any, Any], params: types.SubscriptionsListenRequestParams
    ) -> types.SubscriptionsListenResult:
        """The server's ``on_subscriptions_listen``: attach the stream to its session's bus."""
        identity = identity_of_request(ctx.request)  # part of every session's key, as in the store
        key = session_key(ctx, identity.name if identity else None)
        entry = self._by_key.get(key)
        if entry is None:
            bus = InMemorySubscriptionBus()
            entry = self._by_key[key] = _Listeners(bus, ListenHandler(bus))
        entry.streams += 1
        try:
            return await entry.handler(ctx, params)
        finally:
            entry.streams -= 1
            if entry.streams == 0 and self._by_key.get(key) is entry:
                del self._by_key[key]

    def listening(self, key: str) -> int:
        """How many 2026-era listen streams the session has open (for tests and logs)."""
        entry = self._by_key.get(key)
        return entry.streams if entry else 0

    def can_reach(self, session: Session) -> bool:
        """Whether a notice can reach ``session`` at all: a handshake-era connection with a standalone
        channel, or an open 2026-era listen stream. Nobody is made to wait for a re-list otherwise."""
        connection = session.connection
        if connection is not None and getattr(connection, "has_standalone_channel", False):
            return self.channel_open is None or self.channel_open(connection) is not False
        return self.listening(session.key) > 0

    def list_built(
        self, session: Session, ctx: ServerRequestContext[Any, Any], tool_ids: Collection[str]
    ) -> None:
        """A ``tools/list`` reply holding ``tool_ids`` was built for ``session`` (request ``ctx``): once it
        is written to the client, the client's list holds them (``Session.list_written``)."""
        notices, listed, request_id = session.notices, frozenset(tool_ids), ctx.request_id
        replies = WrittenReplies.of(ctx.request)
        log.debug(
            "relist: %s tools/list %s answered (%d tools) %s", session.key, request_id, len(listed), _now()
        )

        if replies is None or request_id is None:  # the transport cannot say: counted now
            session.list_written(listed, notices, UNREPORTED_SETTLE_S)
            return
        settle_s = replies.settle_s

        def written() -> None:
            log.debug("relist: %s tools/list %s written %s", session.key, request_id, _now())
            session.list_written(listed, notices, settle_s)

        replies.after(request_id, written)

    def behind(self, session: Session) -> bool:
        """Whether ``session``'s client, one that re-lists on a notice it can hear, was written no list
        holding every tool published now (a turn that published them was cut short before its notice
        or before the re-list): then even an answer that publishes nothing new notifies and holds."""
        return (
            session.relists_on_notice is not False
            and not session.client_has(session.published.ids())
            and self.can_reach(session)
        )

    async def hold(self, session: Session, tool_ids: Collection[str], bound_s: float, probe_s: float) -> None:
        """Hold the answer that published ``tool_ids`` until a list reply holding them was written to
        ``session``'s client (module docstring): at most ``bound_s`` for a client known to re-list (it did
        after a notice, or it listens on a 2026-era stream, which it opens to hear them), ``probe_s``
        while that is not known or when replicas share the session. No hold for a client that cannot
        hear the notice or let one go unanswered."""
        if session.relists_on_notice is False or self.lists_ended or not self.can_reach(session):
            log.debug("relist: %s answer not held %s", session.key, _now())
            return
        known = session.relists_on_notice or self.listening(session.key) > 0
        # a shared session's re-list may be answered by another replica, which releases nothing here
        wait_s = bound_s if known and session.shared is None else probe_s
        if wait_s <= 0:
            return
        if await session.wait_listed(tool_ids, wait_s):
            if session.list_settle_s:  # the list reply went another way than this answer will
                await anyio.sleep(session.list_settle_s)
            log.debug("relist: %s answer released: its tools were listed %s", session.key, _now())
        elif session.lists_no_more:
            log.debug("relist: %s answer released: the client's input ended %s", session.key, _now())
        else:
            later = "no longer held" if session.listed_notices < session.notices else "held"
            log.info(
                "%s did not re-list within %.0f ms of list_changed (answers %s)",
                session.key,
                wait_s * 1000,
                later,
            )

    async def tools_changed(self, session: Session) -> None:
        """Tell ``session`` (and only it) that its tool list changed. Never raises."""
        session.notice_sent()
        if session.connection is not None:
            try:
                await session.connection.send_tool_list_changed()
            except Exception:  # a closed connection must not fail the turn that changed the set
                log.debug("list_changed to %s dropped", session.key, exc_info=True)
        entry = self._by_key.get(session.key)
        if entry is not None:
            await entry.bus.publish(ToolsListChanged())
        log.debug("list_changed -> %s %s", session.key, _now())


def streamable_http_reach(manager: StreamableHTTPSessionManager) -> Callable[[Any], bool | None]:
    """``Notifier.channel_open`` for ``manager``'s sessions: whether the client of a connection holds
    its GET stream open (None for a connection that is not one of ``manager``'s sessions). A client
    that never opens one (or not yet) would otherwise hold each first changed ``find_tools`` answer
    for ``publish.relist_wait_ms`` waiting for a re-list that no notice can prompt."""

    def channel_open(connection: Any) -> bool | None:
        # The SDK has no public "is the GET stream open" (third-party gap): its transport keeps that
        # stream's queue under GET_STREAM_KEY while it is connected; the connection is named by the
        # session id the manager keys its transports by.
        session_id = getattr(connection, "session_id", None)
        transport = manager._server_instances.get(session_id) if isinstance(session_id, str) else None
        if transport is None:
            return None
        return GET_STREAM_KEY in transport._request_streams

    return channel_open
