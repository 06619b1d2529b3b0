"""Streamable HTTP: ``find_tools`` and ``tools/list`` answered with one JSON body, not an SSE stream.

The spec lets a server answer any POSTed request either as ``application/json`` or as a
``text/event-stream`` when the client accepts both (every client must read both). The SDK picks one
mode per session manager: SSE keeps a request-scoped channel, which a proxied call needs (upstream
sampling goes to the client on it), but costs the event loop a response task group, a ping task and
an SSE encoder per POST: under 50 sessions that was the largest single part of a cached
``find_tools``, and a client that honours ``list_changed`` follows each changed answer
with a ``tools/list``. Neither sends anything on that channel (no sampling, no progress, no log
messages; ``list_changed`` travels on the session's GET stream), so this module answers both as
JSON and leaves every other request, and the 2026-era path, exactly as the SDK serves it.

How: the session manager's transports become ``_FindToolsAsJson``, whose
``is_json_response_enabled`` is read from a context variable set only while that request's own
handler runs (the ASGI request's task): concurrent requests of the same session keep their modes.
The SDK has no per-request switch (third-party gap), hence the subclass of its private hooks.

``ReportingWritten`` wraps the manager's ASGI app so that every request's replies are reported as
written once its response was sent (``server/turns/notify.py``: a held ``find_tools`` answer waits for that).
"""

from __future__ import annotations

import json
from contextvars import ContextVar
from typing import Any, cast

from mcp.server.streamable_http import StreamableHTTPServerTransport, check_accept_headers
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from toolweave.server.fronts.handshake import FIND_TOOLS
from toolweave.server.turns.notify import OTHER_CONNECTION_SETTLE_S, WrittenReplies

__all__ = ["ReportingWritten", "answer_find_tools_as_json", "answers_as_json"]

_json_answer: ContextVar[bool] = ContextVar("toolweave_json_answer", default=False)
_WORDS = (FIND_TOOLS.encode(), b"tools/list")


def answers_as_json(body: bytes, accept_json: bool, accept_sse: bool) -> bool:
    """Whether a POST with ``body`` is a ``find_tools`` call or a ``tools/list`` that may be answered
    as plain JSON.

    Only when the client accepts both types: one that accepts JSON alone is refused by the SSE mode
    (406), and must stay refused."""
    if not (accept_json and accept_sse) or not any(word in body for word in _WORDS):
        return False  # the substring test skips parsing every other request
    try:
        message = json.loads(body)
    except ValueError:
        return False  # the SDK answers the parse error
    if not isinstance(message, dict) or "id" not in message:  # a notification has no answer
        return False
    if message.get("method") == "tools/list":
        return True
    params = message.get("params")
    return (
        message.get("method") == "tools/call"
        and isinstance(params, dict)
        and params.get("name") == FIND_TOOLS
    )


class _FindToolsAsJson(StreamableHTTPServerTransport):
    """A session's transport that answers ``find_tools`` and ``tools/list`` as JSON (module docstring)."""

    @property
    def is_json_response_enabled(self) -> bool:
        return _json_answer.get()

    @is_json_response_enabled.setter
    def is_json_response_enabled(self, value: bool) -> None:
        if value:  # the manager runs in SSE mode: nothing here may switch every request to JSON
            raise ValueError("_FindToolsAsJson serves an SSE-mode session manager only")

    async def _handle_post_request(
        self, scope: Scope, request: Request, receive: Receive, send: Send
    ) -> None:
        accept_json, accept_sse = check_accept_headers(request)
        try:
            body = await request.body()  # Starlette keeps it: the SDK's own read gets the same bytes
        except Exception:  # a client that left: the SDK meets the same error and answers it as ever
            body = b""
        token = _json_answer.set(answers_as_json(body, accept_json, accept_sse))
        try:
            await super()._handle_post_request(scope, request, receive, send)
        finally:
            _json_answer.reset(token)


class _SessionManager(StreamableHTTPSessionManager):
    def _admit_session(self, requestor: Any) -> StreamableHTTPServerTransport | None:
        transport = super()._admit_session(requestor)
        if transport is not None:
            transport.__class__ = _FindToolsAsJson  # same layout: only the two hooks above differ
        return transport


def answer_find_tools_as_json(manager: StreamableHTTPSessionManager) -> None:
    """Make ``manager`` (an SSE-mode, stateful session manager) answer ``find_tools`` and
    ``tools/list`` as JSON."""
    if manager.json_response or manager.stateless:
        raise ValueError("answer_find_tools_as_json needs a stateful session manager in SSE mode")
    manager.__class__ = _SessionManager
    # what the route calls (the SDK types it as its own body-limit middleware: any ASGI app does)
    manager.asgi_app = cast(Any, ReportingWritten(manager.asgi_app))


class ReportingWritten:
    """ASGI wrapper: the handlers of a request report their replies as written once the request's
    response was sent, that is once the SDK's handling returned (a held find_tools answer waits for
    the list reply: server/turns/notify.py)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        replies = WrittenReplies(settle_s=OTHER_CONNECTION_SETTLE_S)  # the answer goes on another request
        replies.in_scope(scope)
        try:
            await self.app(scope, receive, send)
        finally:
            replies.all_written()
