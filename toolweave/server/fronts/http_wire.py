"""ASGI plumbing of the HTTP front (``server/fronts/http_front.py``): a request body given again to the full
app, responses written whole, and the ``send`` wrappers that let the full app continue what the front
began (a listen stream, a session the front named) or end a stream cut at shutdown. Standard library
only, like the front.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from toolweave.server.fronts import handshake
from toolweave.server.fronts.front_answers import SESSION_HEADER

__all__ = [
    "SSE_HEADERS",
    "Ending",
    "Message",
    "Receive",
    "Replayed",
    "Scope",
    "Send",
    "announcing",
    "continuing",
    "renaming",
    "replies",
    "respond",
    "sse_event",
    "with_header",
]

log = logging.getLogger("toolweave.server.fronts.http_front")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


def sse_event(message: dict[str, Any]) -> bytes:
    """One JSON-RPC message as an SSE event, as the SDK writes it."""
    return f"event: message\r\ndata: {json.dumps(message, separators=(',', ':'))}\r\n\r\n".encode()


SSE_HEADERS = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache, no-transform"),
    (b"connection", b"keep-alive"),
    (b"x-accel-buffering", b"no"),
]


def with_header(scope: Scope, name: bytes, value: bytes) -> Scope:
    kept = [(k, v) for k, v in scope.get("headers", ()) if k.lower() != name]
    return {**scope, "headers": [*kept, (name, value)]}


def replies(body: bytes, content_type: str) -> list[dict[str, Any]]:
    """The JSON-RPC messages of a response body (JSON, or the ``data:`` lines of an SSE stream)."""
    if not content_type.startswith("text/event-stream"):
        parsed = json.loads(body) if body.strip() else None
        return [parsed] if isinstance(parsed, dict) else []
    found = []
    for line in body.splitlines():
        if line.startswith(b"data:"):
            with contextlib.suppress(ValueError):
                found.append(json.loads(line[5:]))
    return [m for m in found if isinstance(m, dict)]


class Replayed:
    """A receive channel that gives ``body`` first (already read by the front), then the real one."""

    def __init__(self, body: bytes, receive: Receive, more: bool = False) -> None:
        self._first: Message | None = {"type": "http.request", "body": body, "more_body": more}
        self._receive = receive

    async def __call__(self) -> Message:
        first, self._first = self._first, None
        return first if first is not None else await self._receive()


class Ending:
    """``send`` that knows whether the response ended. At shutdown the SDK's SSE streams (a session's GET
    stream, a call's answer) return once cancelled without their last body message, and uvicorn then
    logs an ERROR per stream ("ASGI callable returned without completing response"): ``finish`` ends
    such a response, so that a stop with many sessions open logs nothing but its own line."""

    def __init__(self, send: Send) -> None:
        self._send = send
        self._started = False
        self._ended = False

    async def __call__(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self._started = True
        elif message["type"] == "http.response.body" and not message.get("more_body"):
            self._ended = True
        await self._send(message)

    async def finish(self) -> None:
        if self._started and not self._ended:
            with contextlib.suppress(Exception):  # the client may be gone: nothing left to tell it
                await self._send({"type": "http.response.body", "body": b"", "more_body": False})


def continuing(send: Send, ack: dict[str, Any]) -> Send:
    """``send`` for the full app serving a listen stream the front opened: its response start and its
    own acknowledgement are dropped (compared with the front's); an answer it gives as JSON instead of
    a stream (an error) goes on the stream as its last event."""
    seen = {"ack": False, "json": False}

    async def continued(message: Message) -> None:
        if message["type"] == "http.response.start":
            kind = dict(message.get("headers", ())).get(b"content-type", b"")
            seen["json"] = not kind.startswith(b"text/event-stream")
            return
        chunk = message.get("body", b"") if message["type"] == "http.response.body" else b""
        if seen["json"] and chunk:
            message = {
                **message,
                "body": b"".join(sse_event(r) for r in replies(chunk, "application/json")),
            }
        elif not seen["ack"] and chunk.startswith(b"event: message"):
            first = replies(chunk, "text/event-stream")
            if first and first[0].get("method") == handshake.LISTEN_ACKNOWLEDGED:
                seen["ack"] = True
                if first[0].get("params") != ack:
                    log.error(
                        "the early listen acknowledgement differs: %s != %s", ack, first[0].get("params")
                    )
                return
        await send(message)

    return continued


def renaming(send: Send, sdk: bytes, front: bytes) -> Send:
    """``send``, with the SDK's session id in response headers given as the front's."""

    async def renamed(message: Message) -> None:
        if message["type"] == "http.response.start":
            swapped = [
                (k, front if k.lower() == SESSION_HEADER and v == sdk else v)
                for k, v in message.get("headers", ())
            ]
            message = {**message, "headers": swapped}
        await send(message)

    return renamed


async def respond(
    send: Send, status: int, payload: dict[str, Any] | None, session: str | None = None, before: bytes = b""
) -> None:
    """``payload`` as JSON, or as the last SSE event after ``before`` (notices that come first)."""
    if before and payload is not None:
        body = before + sse_event(payload)
        headers = [(b"content-length", str(len(body)).encode()), *SSE_HEADERS]
    else:
        body = b"" if payload is None else json.dumps(payload, separators=(",", ":")).encode()
        headers = [(b"content-length", str(len(body)).encode())]
        if payload is not None:
            headers.append((b"content-type", b"application/json"))
    if session is not None:
        headers.append((SESSION_HEADER, session.encode()))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})


def announcing(send: Send, event: bytes) -> Send:
    """``send`` for a GET stream the full app opens: ``event`` (an SSE event) goes first on it."""

    async def announced(message: Message) -> None:
        await send(message)
        start = message["type"] == "http.response.start"
        if start and message.get("status") == 200:
            kind = dict(message.get("headers", ())).get(b"content-type", b"")
            if kind.startswith(b"text/event-stream"):
                await send({"type": "http.response.body", "body": event, "more_body": True})

    return announced
