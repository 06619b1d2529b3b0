"""Upstream transports that a misbehaving server cannot break: bounded stdio and a capped HTTP client.

The SDK's ``stdio_client`` decodes the server's stdout strictly (one invalid UTF-8 byte kills its
reader, and the session never notices), logs a traceback for every non-JSON line, and joins a line
in memory however long it is (a 50 MB result peaks at ~700 MB). ``bounded_stdio_client`` keeps the
SDK's process handling (spawn, shutdown escalation: its helpers are reused) and replaces the reader:

* lines are split on bytes and decoded one by one: invalid UTF-8 is replaced (``U+FFFD``) and
  counted, never fatal;
* a line that is not JSON-RPC is counted and logged once per burst (``BurstLog``), not one traceback
  each. When it still names a response ``id`` (a garbled answer), that request is failed at once with
  a JSON-RPC error instead of waiting for the call timeout;
* a line longer than ``max_line_bytes`` is not collected: its request is failed as soon as the limit
  is crossed, and the rest of the line is skipped while streaming.

For streamable HTTP, ``capped_http_client`` stops reading a POST response (JSON or SSE) after
``max_bytes``; the SDK then resolves the request with an error and ``on_cut`` lets the backend say
why. The long-lived GET stream is not capped in total (the SDK bounds each of its events).
"""

from __future__ import annotations

import logging
import re
import sys
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any, TextIO

import anyio
import anyio.lowlevel
import httpx2
import mcp_types as types
from mcp import StdioServerParameters
from mcp.client import stdio as sdk_stdio
from mcp.shared._httpx_utils import MCP_DEFAULT_SSE_READ_TIMEOUT, MCP_DEFAULT_TIMEOUT
from mcp.shared.message import SessionMessage

from toolweave.adapters.mcp.raw import RawCalls

__all__ = [
    "OVERSIZE_CODE",
    "BurstLog",
    "ResultTooLarge",
    "bounded_stdio_client",
    "capped_http_client",
    "find_id",
]

log = logging.getLogger(__name__)

OVERSIZE_CODE = -32001
"""JSON-RPC error code of a request whose answer was larger than the limit (cut while streaming)."""
GARBLED_CODE = types.PARSE_ERROR
_HEAD_BYTES = 4096  # enough of an oversized line to find its id
_READ_CHUNK = 65536
_ID = re.compile(r'"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.){0,200}")')


class BurstLog:
    """Logs the first of a kind of problem at once, then at most one summary per ``window_s``.

    A server printing 150 stray lines gets two log lines, not 150 tracebacks.
    """

    def __init__(self, label: str, window_s: float = 5.0) -> None:
        self.label = label
        self.window_s = window_s
        self.totals: dict[str, int] = {}
        self._pending: dict[str, int] = {}
        self._last: dict[str, float] = {}

    def note(self, kind: str, example: str) -> None:
        self.totals[kind] = self.totals.get(kind, 0) + 1
        now = time.monotonic()
        last = self._last.get(kind)
        if last is None:
            self._last[kind] = now
            log.warning(
                "%s: %s (e.g. %r); more are counted, not logged one by one", self.label, kind, example
            )
            return
        self._pending[kind] = self._pending.get(kind, 0) + 1
        if now - last >= self.window_s:
            self._flush(kind, now)

    def close(self) -> None:
        for kind in list(self._pending):
            self._flush(kind, time.monotonic())

    def _flush(self, kind: str, now: float) -> None:
        count = self._pending.pop(kind, 0)
        self._last[kind] = now
        if count:
            log.warning("%s: %d more: %s (%d in all)", self.label, count, kind, self.totals[kind])


class _BurstSdkParseErrors(logging.Filter):
    """The SDK's streamable-HTTP client logs a full traceback for every event it cannot parse; an
    upstream streaming noise would flood stderr. Those records are counted into a ``BurstLog``."""

    MESSAGES = ("Error parsing SSE message", "Error parsing JSON response")

    def __init__(self) -> None:
        super().__init__()
        self.burst = BurstLog("streamable-HTTP upstream")

    def filter(self, record: logging.LogRecord) -> bool:
        if record.msg not in self.MESSAGES:
            return True
        exc = record.exc_info[1] if record.exc_info else None
        first = str(exc).splitlines()[-2 if exc and len(str(exc).splitlines()) > 1 else 0] if exc else ""
        self.burst.note("unparseable message in an answer ignored", first[:120])
        return False


logging.getLogger("mcp.client.streamable_http").addFilter(_BurstSdkParseErrors())


def find_id(head: str) -> types.RequestId | None:
    """The first ``"id"`` value in the start of a (possibly broken or cut) JSON-RPC message."""
    match = _ID.search(head)
    if match is None:
        return None
    raw = match.group(1)
    return int(raw) if raw[0] != '"' else raw[1:-1]


def _response_id(head: str) -> types.RequestId | None:
    """The id of a (possibly broken) JSON-RPC *response*; None for requests, notifications, noise."""
    if '"method"' in head or not ('"result"' in head or '"error"' in head):
        return None
    return find_id(head)


def _error(request_id: types.RequestId, code: int, message: str) -> SessionMessage:
    error = types.ErrorData(code=code, message=message)
    return SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=request_id, error=error))


class _LineReader:
    """Turns the server's stdout bytes into session messages, with every limit described above."""

    def __init__(
        self,
        label: str,
        max_line_bytes: int,
        send: Callable[[SessionMessage], Any],
        raw: RawCalls | None = None,
    ) -> None:
        self.label = label
        self.max_line_bytes = max_line_bytes
        self.send = send
        self.raw = raw
        self.burst = BurstLog(label)
        self._buffer = bytearray()
        self._skipping = False  # inside an oversized line, dropping bytes until its newline

    async def feed(self, chunk: bytes) -> None:
        start = 0
        while start < len(chunk):
            newline = chunk.find(b"\n", start)
            end = len(chunk) if newline < 0 else newline
            if not self._skipping:
                self._buffer += chunk[start:end]
                if len(self._buffer) > self.max_line_bytes:
                    await self._oversized()
            if newline < 0:
                return
            if self._skipping:
                self._skipping = False
            else:
                line = bytes(self._buffer)
                self._buffer.clear()
                await self._line(line)
            start = newline + 1

    async def _oversized(self) -> None:
        head = bytes(self._buffer[:_HEAD_BYTES]).decode("utf-8", errors="replace")
        self._buffer.clear()
        self._skipping = True
        request_id = _response_id(head)
        self.burst.note(f"line longer than {self.max_line_bytes:,} bytes skipped", head[:80])
        if request_id is not None:
            message = (
                f"the upstream's answer is larger than {self.max_line_bytes:,} bytes (max_result_bytes); "
                "it was cut off while streaming"
            )
            await self._fail(request_id, OVERSIZE_CODE, message)

    async def _fail(self, request_id: types.RequestId, code: int, message: str) -> None:
        """Fail the call ``request_id`` with the link's own error: a raw call's here, else the SDK's."""
        if self.raw is None or not self.raw.fail(request_id, code, message):
            await self.send(_error(request_id, code, message))

    async def _line(self, raw: bytes) -> None:
        raw = raw.rstrip(b"\r")
        if not raw.strip():
            return
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            text = raw.decode("utf-8", errors="replace")
            self.burst.note("invalid UTF-8 on stdout (replaced with U+FFFD)", text[:80])
        if self.raw is not None and self.raw.took(text):  # the answer to a raw call: no SDK parse
            return
        try:
            message = types.jsonrpc_message_adapter.validate_json(text, by_name=False)
        except ValueError:
            request_id = _response_id(text[:_HEAD_BYTES])
            if request_id is None:
                self.burst.note("non-JSON-RPC line on stdout ignored", text[:80])
                return
            self.burst.note("garbled answer on stdout", text[:80])
            await self._fail(
                request_id, GARBLED_CODE, "the upstream's answer is not valid JSON-RPC (garbled output)"
            )
            return
        await self.send(SessionMessage(message))


@asynccontextmanager
async def bounded_stdio_client(
    server: StdioServerParameters,
    *,
    label: str,
    max_line_bytes: int,
    errlog: TextIO = sys.stderr,
    raw: RawCalls | None = None,
) -> AsyncGenerator[Any, None]:
    """``mcp.client.stdio.stdio_client`` with the bounded reader (see the module docstring).
    ``raw``: the connection's raw calls (``raw.py``), written to the same stdin, answered from its stdout.

    Spawning and stopping reuse the SDK's own helpers, so process-tree shutdown stays the SDK's.
    """
    command = await sdk_stdio._get_executable_command(server.command)
    process = await sdk_stdio._create_platform_compatible_process(
        command=command,
        args=server.args,
        env=sdk_stdio.get_default_environment() | (server.env or {}),
        errlog=errlog,
        cwd=server.cwd,
    )
    read_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, write_reader = anyio.create_memory_object_stream[SessionMessage](0)
    writer_done = anyio.Event()
    shutting_down = False

    async def stdout_reader() -> None:
        assert process.stdout is not None
        reader = _LineReader(label, max_line_bytes, read_writer.send, raw)
        try:
            async with read_writer:
                try:
                    while True:
                        try:
                            chunk = await process.stdout.receive(_READ_CHUNK)
                        except anyio.EndOfStream:
                            return
                        await reader.feed(chunk)
                finally:
                    if raw is not None:
                        raw.close()
                    reader.burst.close()
                    await sdk_stdio._drain_stdout(process)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, ConnectionError):
            if not shutting_down:
                log.debug("%s: stdout reader stopped", label, exc_info=True)

    async def stdin_writer() -> None:
        assert process.stdin is not None
        try:
            async with write_reader:
                async for session_message in write_reader:
                    if raw is not None:
                        raw.saw(session_message.message)
                    data = session_message.message.model_dump_json(by_alias=True, exclude_unset=True)
                    await process.stdin.send((data + "\n").encode())
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            await read_writer.aclose()  # the session must see the end, not wait forever
        finally:
            writer_done.set()

    async def shutdown() -> None:
        read_stream.close()
        write_stream.close()
        with anyio.move_on_after(sdk_stdio._WRITER_FLUSH_TIMEOUT):
            await writer_done.wait()
        await sdk_stdio._stop_server_process(process)
        await sdk_stdio._aclose_all(read_stream, write_stream, read_writer, write_reader)
        await anyio.lowlevel.checkpoint()

    if raw is not None:
        assert process.stdin is not None
        raw.attach(process.stdin)
    async with anyio.create_task_group() as tg:
        tg.start_soon(stdout_reader)
        tg.start_soon(stdin_writer)
        try:
            yield read_stream, write_stream
        finally:
            shutting_down = True
            with anyio.CancelScope(shield=True):
                await shutdown()
            tg.cancel_scope.cancel()
    await anyio.lowlevel.cancel_shielded_checkpoint()


class ResultTooLarge(httpx2.StreamError):
    """A POST response went past the byte cap; raised inside the SDK's read, which resolves the call."""


class _CappedStream(httpx2.AsyncByteStream):
    def __init__(self, inner: Any, max_bytes: int, on_cut: Callable[[], None]) -> None:
        self._inner = inner
        self._max_bytes = max_bytes
        self._on_cut = on_cut

    async def __aiter__(self) -> AsyncIterator[bytes]:
        seen = 0
        async for chunk in self._inner:
            seen += len(chunk)
            if seen > self._max_bytes:
                self._on_cut()
                raise ResultTooLarge(
                    f"response larger than {self._max_bytes:,} bytes (max_result_bytes): cut while streaming"
                )
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()


class _CappedTransport(httpx2.AsyncBaseTransport):
    def __init__(self, inner: httpx2.AsyncBaseTransport, max_bytes: int, on_cut: Callable[[], None]) -> None:
        self._inner = inner
        self._max_bytes = max_bytes
        self._on_cut = on_cut

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await self._inner.handle_async_request(request)
        if request.method == "POST":  # answers to our requests; the GET stream lives on
            response.stream = _CappedStream(response.stream, self._max_bytes, self._on_cut)
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()


def capped_http_client(
    *, headers: dict[str, str] | None, max_bytes: int, on_cut: Callable[[], None]
) -> httpx2.AsyncClient:
    """The SDK's default MCP HTTP client (same timeouts), reading at most ``max_bytes`` per POST answer."""
    transport = _CappedTransport(httpx2.AsyncHTTPTransport(), max_bytes, on_cut)
    timeout = httpx2.Timeout(MCP_DEFAULT_TIMEOUT, read=MCP_DEFAULT_SSE_READ_TIMEOUT)
    return httpx2.AsyncClient(headers=headers, timeout=timeout, transport=transport)
