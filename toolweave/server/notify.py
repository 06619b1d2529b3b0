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
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import mcp_types as types
from mcp.server import ServerRequestContext
from mcp.server.streamable_http import GET_STREAM_KEY
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ToolsListChanged

from toolweave.server.auth import identity_of_request
from toolweave.server.sessions import Session, session_key

__all__ = ["Notifier", "streamable_http_reach"]

log = logging.getLogger(__name__)


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
        log.debug("list_changed -> %s", session.key)


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
