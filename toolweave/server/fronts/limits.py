"""Inbound size limits and JSON-RPC error replies that the SDK's transports do not give.

* HTTP / SSE: ``RequestSizeLimit``, an ASGI middleware. A POST body larger than ``max_bytes``
  (by ``Content-Length``, or counted while it streams in) is answered ``413`` with a JSON-RPC error
  body; at most ``max_bytes`` are ever held. A body nested deeper than ``MAX_JSON_DEPTH`` (which the
  SDK's parser would meet with a ``RecursionError`` and a 500) is answered ``400`` with ``-32700``.
* stdio: ``bounded_stdio_server`` wraps the SDK's ``stdio_server``. Lines are read with a length
  limit (an oversized line is skipped while reading, never held whole), and every line that is not
  a JSON-RPC message gets the JSON-RPC reply the SDK would silently drop: ``-32700`` (parse error,
  id null) for text that is not JSON, ``-32600`` (invalid request, with the id when one can be found)
  for JSON that is not a JSON-RPC message and for oversized lines. The process lives on.
"""

from __future__ import annotations

import json
import logging
import re
import sys
from collections.abc import AsyncGenerator, AsyncIterable, AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, suppress
from typing import TYPE_CHECKING, Any, BinaryIO, Protocol

import anyio
import mcp_types as types
from mcp.server.stdio import stdio_server
from mcp.shared._context_streams import create_context_streams
from mcp.shared.message import SessionMessage
from pydantic import ValidationError
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from toolweave.adapters.mcp.transports import find_id
from toolweave.server.fronts.stdio_pipes import PipeWriter, ThreadWriter, open_writer, read_ahead

if TYPE_CHECKING:
    from toolweave.server.fronts.owed import Owed
    from toolweave.server.fronts.relay import CallRelay

__all__ = ["MAX_JSON_DEPTH", "RequestSizeLimit", "bounded_stdio_server", "json_too_deep"]

log = logging.getLogger(__name__)

MAX_JSON_DEPTH = 256
"""Nesting of arrays and objects a request may have (real MCP messages stay far below it)."""
_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_OVERSIZE_KEY = "io.toolweave/oversized_line"
_HEAD_BYTES = 4096
_SKIP_CHUNK = 1 << 20


def _too_large(max_bytes: int) -> str:
    return f"request larger than {max_bytes:,} bytes (max_request_bytes); it was not read"


def _error_body(code: int, message: str, request_id: Any = None) -> bytes:
    return json.dumps(
        {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}
    ).encode()


def json_too_deep(body: bytes, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether ``body`` nests arrays/objects deeper than ``limit``, found without parsing (and so
    without recursion): brackets inside strings do not count."""
    if body.count(b"[") + body.count(b"{") <= limit:
        return False
    depth = deepest = 0
    for bracket in _STRING.sub(b"", body).translate(None, _NOT_BRACKETS):
        depth += 1 if bracket in b"[{" else -1
        deepest = max(deepest, depth)
    return deepest > limit


class RequestSizeLimit:
    """ASGI middleware: POST bodies over ``max_bytes`` get ``413`` with a JSON-RPC error (-32600); bodies
    nested deeper than ``MAX_JSON_DEPTH`` get ``400`` with a parse error (-32700)."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") != "POST":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            await self._reject(send)
            return
        # Read the body here (at most max_bytes), then replay it: the app must never see half a body.
        chunks: list[bytes] = []
        size = 0
        message: Message
        while True:
            message = await receive()
            if message["type"] != "http.request":
                await self.app(scope, _replay([message], receive), send)  # disconnect: let the app see it
                return
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            if size > self.max_bytes:
                await self._reject(send)
                return
            if not message.get("more_body", False):
                break
        data = b"".join(chunks)
        if json_too_deep(data):
            await self._reject(
                send, 400, types.PARSE_ERROR, f"Parse error: JSON nested deeper than {MAX_JSON_DEPTH} levels"
            )
            return
        body: Message = {"type": "http.request", "body": data, "more_body": False}
        await self.app(scope, _replay([body], receive), send)

    async def _reject(
        self, send: Send, status: int = 413, code: int = types.INVALID_REQUEST, message: str = ""
    ) -> None:
        message = message or _too_large(self.max_bytes)
        body = _error_body(code, message)
        log.warning("rejected an HTTP request: %s", message)
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})


def _replay(messages: list[Message], receive: Receive) -> Receive:
    pending = list(messages)

    async def replay() -> Message:
        return pending.pop(0) if pending else await receive()

    return replay


class LineSource(Protocol):
    """Where stdin lines come from: the process's stdin, or the early front's prefix before it."""

    def readline(self, limit: int = -1, /) -> bytes: ...


class _BoundedLines:
    """The client's stdin as text lines of at most ``max_bytes``; longer ones become a marker line.
    Read ahead on a thread of its own (``stdio_pipes.read_ahead``)."""

    def __init__(self, buffer: LineSource, max_bytes: int) -> None:
        self._buffer = buffer
        self._max = max_bytes
        self.take: Callable[[str], bool] | None = None
        """Who may take a line as it arrives, before it is yielded (the stdio relay, while it serves)."""

    def __aiter__(self) -> AsyncIterator[str]:
        return read_ahead(iter(self), self._taken)

    def _taken(self, line: str) -> bool:
        take = self.take
        return take is not None and take(line)

    def __iter__(self) -> Iterator[str]:
        while True:
            line = self._buffer.readline(self._max + 1)
            if not line:
                return
            if len(line) > self._max and not line.endswith(b"\n"):
                head = line[:_HEAD_BYTES].decode("utf-8", errors="replace")
                size = len(line)
                while not line.endswith(b"\n"):  # skip the rest without holding it
                    line = self._buffer.readline(_SKIP_CHUNK)
                    if not line:
                        break
                    size += len(line)
                log.warning("stdin: skipped a %d-byte line (max_request_bytes is %d)", size, self._max)
                yield json.dumps({_OVERSIZE_KEY: size, "id": find_id(head)}) + "\n"
                continue
            yield line.decode("utf-8", errors="replace")


def _reply_to_bad_line(exc: Exception, max_bytes: int) -> SessionMessage:
    """The JSON-RPC error for a stdin line the SDK could not turn into a message."""
    data: Any = None
    if isinstance(exc, ValidationError):
        errors = exc.errors()
        if errors and errors[0].get("type") == "json_invalid":
            return _reply(None, types.PARSE_ERROR, "Parse error: the line is not valid JSON")
        data = errors[0].get("input") if errors else None
    request_id = data.get("id") if isinstance(data, dict) else None
    if not isinstance(request_id, int | str) or isinstance(request_id, bool):
        request_id = None
    if isinstance(data, dict) and _OVERSIZE_KEY in data:
        return _reply(request_id, types.INVALID_REQUEST, _too_large(max_bytes))
    return _reply(request_id, types.INVALID_REQUEST, "Invalid Request: not a JSON-RPC 2.0 message")


def _reply(request_id: types.RequestId | None, code: int, message: str) -> SessionMessage:
    error = types.ErrorData(code=code, message=message)
    return SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=request_id, error=error))


@asynccontextmanager
async def bounded_stdio_server(
    max_bytes: int,
    stdin: LineSource | None = None,
    stdout: BinaryIO | None = None,
    relay: CallRelay | None = None,
    owed: Owed | None = None,
) -> AsyncGenerator[tuple[Any, Any], None]:
    """``mcp.server.stdio.stdio_server`` with a line limit and replies to malformed lines (see above).

    ``stdin``/``stdout`` default to the process's. The process's stdout is claimed as the SDK claims it
    (fd 1 then points at stderr, so that stray output misses the wire) and written on the event loop
    when it is a pipe (``stdio_pipes``). ``relay``: serves the lines it takes (``tools/call``) around the
    SDK and answers them on the same pipe (``server/fronts/relay.py``); only on a pipe, whose writes are whole
    lines on the event loop (threaded writes of two writers could interleave). ``owed``: told each line
    written, and when the client stops reading (``server/fronts/owed.py``)."""
    lines = _BoundedLines(stdin if stdin is not None else sys.stdin.buffer, max_bytes)
    release = None
    if stdout is None:
        stdout, release = claim_stdout()
    # a private duplicate of fd 1 is the transport's alone; the in-place fallback is sys.stdout's buffer
    out = await open_writer(stdout, own_fd=release is not None and stdout is not sys.stdout.buffer)
    if owed is not None:
        out.watch(owed.answered, owed.lost)
    try:
        # the SDK annotates anyio's file type; it only iterates lines and calls write/flush
        async with (
            _relayed(lines, relay, out) as lines_in,
            stdio_server(stdin=lines_in, stdout=out) as (sdk_read, write),  # type: ignore[arg-type]
            _replying(sdk_read, write, max_bytes) as read,
        ):
            yield read, write
    finally:
        out.close()
        if release is not None:
            release()


@asynccontextmanager
async def _relayed(
    lines: AsyncIterable[str], relay: CallRelay | None, out: PipeWriter | ThreadWriter
) -> AsyncGenerator[AsyncIterable[str], None]:
    if relay is None or not isinstance(out, PipeWriter):
        yield lines
        return
    if isinstance(lines, _BoundedLines):  # the relay takes its lines as they arrive: no reader task wakes
        async with relay.taking(out) as take:
            lines.take = take
            try:
                yield lines
            finally:
                lines.take = None
        return
    async with relay.serving(lines, out) as others:
        yield others


def claim_stdout() -> tuple[BinaryIO, Callable[[], None] | None]:
    """fd 1 as the SDK's ``stdio_server`` claims it when given no stdout: the wire served from a private
    duplicate, fd 1 pointed at stderr; and how to give it back. The SDK has no public way to claim it
    and still write the wire itself (third-party gap)."""
    from mcp.server.stdio import _claim_fd, _open_stdout_diversion

    return _claim_fd(1, sys.stdout, "wb", _open_stdout_diversion)


@asynccontextmanager
async def _replying(sdk_read: Any, write: Any, max_bytes: int) -> AsyncGenerator[Any, None]:
    """The SDK's read stream without its exceptions: each malformed line is answered on ``write``."""
    relay_send, relay_receive = create_context_streams[SessionMessage | Exception](0)

    async def relay() -> None:
        async with relay_send, sdk_read:  # the SDK hands its read stream to the reader to close
            async for item in sdk_read:
                if isinstance(item, Exception):
                    with suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
                        await write.send(_reply_to_bad_line(item, max_bytes))
                else:
                    await relay_send.send(item)

    async with anyio.create_task_group() as tg:
        tg.start_soon(relay)
        try:
            yield relay_receive
        finally:
            tg.cancel_scope.cancel()
            relay_receive.close()
            await write.aclose()  # the SDK's writer task ends only when its stream is closed
