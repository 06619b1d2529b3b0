"""``tools/call`` on a stdio upstream without the SDK client's per-request machinery.

The SDK's ``Client.call_tool`` builds the request's models, sends it through the dispatcher (a memory
stream per request, its clock, cancel scopes, the writer task's model dump) and parses the answer line
into a message model before the result model is validated: a fifth of the gateway's CPU per proxied
call in profiles. ``RawCalls`` writes the request line to the upstream's stdin itself and takes the
answer off its stdout (``transports._LineReader``) before the SDK parses it, by the request id, which only
these calls use (``toolweave-raw-N``); every other line still goes the SDK's way.

What stays the same: the 2026 era's envelope (``_meta``) is the one the SDK client sent on its own
requests on this connection; a call given up (timeout, cancellation) is followed by
``notifications/cancelled`` as the SDK sends it; a stdout that ends fails every open call at once; an
answer too large or garbled fails its call with the link's own errors. The caller (``MCPBackend``)
validates the result model and its output schema as ``Client.call_tool`` does, and keeps the SDK path
for calls it cannot serve here (a call with a sampler: the upstream may ask for sampling, which only
the SDK client drives).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import math
from contextlib import suppress
from typing import Any

import anyio
import mcp_types as types
from anyio.abc import ByteSendStream

from toolweave.adapters import plain_schema
from toolweave.wire_meta import SERVER_INFO_META_KEY

__all__ = ["RAW_ID_PREFIX", "RawCalls", "UpstreamClosed"]

log = logging.getLogger(__name__)

RAW_ID_PREFIX = "toolweave-raw-"
_MARK = f'"{RAW_ID_PREFIX}'
_ENVELOPE_KEYS = (
    types.PROTOCOL_VERSION_META_KEY,
    types.CLIENT_INFO_META_KEY,
    types.CLIENT_CAPABILITIES_META_KEY,
)
_CANCEL_WRITE_S = 1.0
_to_json = json.JSONEncoder(ensure_ascii=False).encode
"""``json.dumps(..., ensure_ascii=False)``: the same text, without building an encoder on every call."""


class UpstreamClosed(ConnectionError):
    """The upstream's stdout ended (or the link closed) before the call was answered."""


class _Waiter:
    """One call's answer, awaited as a bare future (cheaper than an ``anyio.Event`` and its wait, on
    every call). ``settled``: an answer came, or the link closed. ``expired``: the call's deadline
    passed first (a timer on the loop resolves the future: no cancel scope per call)."""

    __slots__ = ("answer", "done", "expired", "settled")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.done: asyncio.Future[None] = loop.create_future()
        self.answer: dict[str, Any] | None = None  # None once settled: the link closed
        self.settled = False
        self.expired = False

    def settle(self) -> None:
        self.settled = True
        if not self.done.done():  # a caller cancelled while waiting cancelled the future with it
            self.done.set_result(None)

    def expire(self) -> None:
        if not self.done.done():
            self.expired = True
            self.done.set_result(None)


class RawCalls:
    """Raw ``tools/call`` requests on one stdio link (module docstring); one object per connection."""

    def __init__(self) -> None:
        self._stdin: ByteSendStream | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._pending: dict[str, _Waiter] = {}
        self._ids = itertools.count(1)
        self.envelope: dict[str, Any] | None = None
        """The SDK client's own 2026-era ``_meta`` on this connection (None before its first request)."""
        self._output_checks: dict[str, tuple[object, plain_schema.Check | None]] = {}

    # -- the link's side ------------------------------------------------------------------------------
    def attach(self, stdin: ByteSendStream) -> None:
        self._stdin = stdin
        # anyio's send always yields a loop turn (a shielded checkpoint) after the write: a call writes
        # through asyncio's writer under it (no public accessor) and waits only when the pipe is full
        writer = getattr(stdin, "_stream", None)
        self._writer = writer if isinstance(writer, asyncio.StreamWriter) else None

    def saw(self, message: Any) -> None:
        """Each message the SDK client writes: its 2026-era envelope is copied from its requests."""
        if self.envelope is None and isinstance(message, types.JSONRPCRequest):
            meta = (message.params or {}).get("_meta")
            if isinstance(meta, dict) and types.PROTOCOL_VERSION_META_KEY in meta:
                self.envelope = {k: meta[k] for k in _ENVELOPE_KEYS if k in meta}

    def took(self, text: str) -> bool:
        """Resolve the call ``text`` answers, when it is one of ours; False leaves the line to the SDK."""
        if not self._pending or _MARK not in text:
            return False
        try:
            message = json.loads(text)
        except ValueError:
            return False  # garbled: the link answers it with its own error (``fail``)
        if not isinstance(message, dict) or ("result" not in message and "error" not in message):
            return False
        waiter = self._pending.get(message.get("id"))  # type: ignore[arg-type]
        if waiter is None:
            return False
        waiter.answer = message
        waiter.settle()
        return True

    def fail(self, request_id: types.RequestId, code: int, message: str) -> bool:
        """Answer one of our calls with the link's own error (an answer too large, or garbled)."""
        waiter = self._pending.get(request_id) if isinstance(request_id, str) else None
        if waiter is None:
            return False
        waiter.answer = {"error": {"code": code, "message": message}}
        waiter.settle()
        return True

    def close(self) -> None:
        """The upstream's stdout ended: every open call fails now (``UpstreamClosed``)."""
        self._stdin = self._writer = None
        for waiter in self._pending.values():
            waiter.settle()

    # -- the caller's side ----------------------------------------------------------------------------
    def serves(self, modern: bool) -> bool:
        return self._stdin is not None and (self.envelope is not None or not modern)

    async def call(
        self, name: str, arguments: dict[str, Any], *, modern: bool, deadline: float = math.inf
    ) -> dict[str, Any]:
        """Send ``tools/call`` and wait for its answer: the JSON-RPC message with ``result`` or ``error``.

        ``deadline``: when to give up (the event loop's clock, which is anyio's): the call then raises
        ``TimeoutError``, as a cancel scope's deadline would end it, once the upstream was told. Raises
        ``UpstreamClosed`` when the link is gone or goes before the answer."""
        stdin = self._stdin
        if stdin is None:
            raise UpstreamClosed("the upstream's link is closed")
        request_id = f"{RAW_ID_PREFIX}{next(self._ids)}"
        params: dict[str, Any] = {"name": name, "arguments": arguments}
        if modern and self.envelope is not None:
            params["_meta"] = self.envelope
        loop = asyncio.get_running_loop()
        waiter = self._pending[request_id] = _Waiter(loop)
        line = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}
        sent = False
        data = (_to_json(line) + "\n").encode()
        # the deadline is a timer that resolves the waiter's future (a cancel scope's deadline is the same
        # timer, plus the scope's bookkeeping of tasks and parents on the way in and out of every call)
        timer = loop.call_at(deadline, waiter.expire) if deadline != math.inf else None
        try:
            if deadline <= loop.time():  # spent already (a reconnect took it): nothing is sent
                raise TimeoutError
            await self._send(stdin, data, deadline)
            sent = True
            await waiter.done
            if waiter.expired:  # the upstream may stop working on it (as the SDK asks)
                await self._cancel(stdin, request_id)
                raise TimeoutError
        except TimeoutError:
            raise  # an OSError too, but no failed write
        except anyio.get_cancelled_exc_class():
            if sent and not waiter.settled:  # the upstream may stop working on it (as the SDK asks)
                await self._cancel(stdin, request_id)
            raise
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError) as exc:
            raise UpstreamClosed(f"writing to the upstream failed: {exc}") from exc
        finally:
            if timer is not None:
                timer.cancel()
            del self._pending[request_id]
        if waiter.answer is None:
            raise UpstreamClosed("the upstream closed its stdout during the call")
        _drop_stamp(waiter.answer.get("result"))
        return waiter.answer

    async def _send(self, stdin: ByteSendStream, data: bytes, deadline: float) -> None:
        """Write ``data`` to the upstream's stdin; ``TimeoutError`` when it is still not written by
        ``deadline`` (the upstream stopped reading its stdin and the pipe is full)."""
        writer = self._writer
        if writer is not None:
            writer.write(data)
            if not writer.transport.get_write_buffer_size():
                await writer.drain()  # the pipe took it all: returns at once (raises if the link is lost)
                return
        with anyio.CancelScope(deadline=deadline) as scope:  # a wait: bounded by the call's deadline
            if writer is not None:
                await writer.drain()
            else:
                await stdin.send(data)
        if scope.cancelled_caught:
            raise TimeoutError

    def quick_valid(self, session: Any, tool: str, result: types.CallToolResult) -> bool:
        """True when ``result``'s structured content certainly fits the output schema the SDK session
        holds for ``tool`` (``adapters/plain_schema.py``), so its own check would pass; False: ask it.
        The schema is the session's own (read from its cache: no public accessor), compared by identity,
        so a re-listed tool's new schema gets a new check."""
        content = result.structured_content
        schemas = getattr(session, "_tool_output_schemas", None)
        schema = schemas.get(tool) if content is not None and isinstance(schemas, dict) else None
        if schema is None:
            return False
        cached = self._output_checks.get(tool)
        if cached is None or cached[0] is not schema:
            cached = self._output_checks[tool] = (schema, plain_schema.quick_check(schema))
        check = cached[1]
        return check is not None and check(content)

    @staticmethod
    async def _cancel(stdin: ByteSendStream, request_id: str) -> None:
        notice = {
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": request_id, "reason": "the gateway's caller gave up"},
        }
        with anyio.move_on_after(_CANCEL_WRITE_S, shield=True), suppress(Exception):
            await stdin.send((json.dumps(notice) + "\n").encode())


def _drop_stamp(body: Any) -> None:
    """Drop the upstream's ``serverInfo`` stamp from a result we parsed. The proxy drops it from every
    result (``call_errors.finish_result``, by a copy of the result model): here, before the model is
    built, it costs no copy. A ``_meta`` left empty goes too (``finish_result`` leaves None)."""
    meta = body.get("_meta") if isinstance(body, dict) else None
    if isinstance(meta, dict) and SERVER_INFO_META_KEY in meta:
        del meta[SERVER_INFO_META_KEY]
        if not meta:
            del body["_meta"]
