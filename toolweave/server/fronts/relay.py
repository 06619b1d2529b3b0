"""A stdio client's ``tools/call`` answered without the SDK's per-request machinery.

Profiles of a proxied call (yappi, CPU clock, every thread) put most of the gateway's CPU in the SDK on
the client-facing hop: the stdio reader's message model, the dispatcher's task and cancel scope, the
per-request ``Connection``, runner and session of the 2026 era, the OpenTelemetry middleware, the
request's surface validation and params model, the result's dump, and three memory-stream relays
before the writer dumps the response model again. None of it decides anything a call needs.

``CallRelay`` sits on the stdin lines (``limits.bounded_stdio_server``): it is asked about each line as
the line arrives on the event loop (``taking``: in the callback that hands the line over from the reader
thread, so a relayed call wakes no reader task), or filters an iterator of lines (``serving``). A line
that is a well-formed ``tools/call`` of a registry tool, from the client the SDK path already served, is
parsed once and served by ``Gateway.serve_call`` (the same code as the SDK's handler: session, readiness,
guard, proxy, timeout, result limits, usage, traffic, next steps, metrics, audit); its result is shaped
for the wire as the SDK's runner shapes it (the era's result surface, ``resultType`` and the
``serverInfo`` stamp of the 2026 era) and written to the pipe as one line. ``notifications/cancelled``
for such a call cancels it and nothing is answered, as the SDK's dispatcher does; at shutdown an
unanswered call gets the SDK's "Connection closed" error.

Everything else goes to the SDK unchanged, as do calls the relay cannot judge alone: before the SDK
path has served this client (era and session unknown), the meta-tools, a request naming a session of
its own (``_meta["io.toolweave/session"]``), a handshake-era client that declared sampling or
elicitation (the upstream may ask it through the request's back channel), an envelope of the other era
or malformed params (the SDK answers those with its JSON-RPC errors), a registry that is not ready yet.

A call's result may reach the client before a ``list_changed`` the call caused (that notice travels
the SDK's write stream): JSON-RPC does not order a response against notifications, and no client
waits on that order (a held ``find_tools`` answer is the SDK path's). Taken as it arrives, a call may
also start before the SDK has read a request sent just before it: requests are answered in no set
order, and the SDK path runs each in a task of its own as well.

Calls are served by worker tasks that stay: a call is handed to an idle one (the future it waits on) and
a new one starts only when every worker is busy, so sequential calls cost no task each and concurrent
calls still run side by side. What a successful call teaches is learned right after its answer line
was written (``CallPath.after_reply``), not before.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterable, AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeGuard

import anyio
import mcp_types as types
from mcp.server import ServerRequestContext
from mcp.shared.dispatcher import coerce_request_id
from mcp.shared.jsonrpc_dispatcher import progress_token_from_params
from mcp_types.methods import serialize_server_result
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from toolweave.server.calls.scopes import cancel_scope
from toolweave.server.sessions.session_book import SESSION_META_KEY, Session
from toolweave.server.turns.meta_tools import CALL_TOOL, FIND_TOOLS
from toolweave.wire_meta import SERVER_INFO_META_KEY

if TYPE_CHECKING:
    from toolweave.server.gateway import Gateway

__all__ = ["CallRelay", "LineWriter"]

log = logging.getLogger(__name__)

_MESSAGE_KEYS = frozenset({"jsonrpc", "id", "method", "params"})
_PARAM_KEYS = frozenset({"name", "arguments", "_meta"})
_META_TOOLS = frozenset({FIND_TOOLS, CALL_TOOL})
_SHUTDOWN_WRITE_S = 1.0
"""How long a call cut off by shutdown may try to say so (the SDK's bound for the same write)."""
_to_json = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
"""``json.dumps`` with these options: the same text, without building an encoder for every answer."""


class LineWriter(Protocol):
    """Where answers go: the wire's writer (``stdio_pipes.PipeWriter``), one whole line per write."""

    async def write(self, text: str) -> None: ...


@dataclass(frozen=True)
class _Client:
    """What the SDK path learned about the stdio client: enough to serve its calls the same way."""

    session: Session
    modern: bool
    version: str  # the handshake era's negotiated version (a 2026-era request names its own)
    can_be_asked: bool
    """It declared sampling or elicitation: its calls go to the SDK, whose request context can ask it."""


@dataclass(slots=True)
class _Job:
    """One relayed call, as a worker serves it."""

    request_id: types.RequestId
    session: Session
    name: str
    arguments: dict[str, Any] | None
    version: str
    scope: anyio.CancelScope | None = None
    """The scope of the worker serving it (None until one does): what the client's cancel cancels."""
    cancelled: bool = False
    """The client cancelled it (``notifications/cancelled``): it is never answered."""


class CallRelay:
    """Serves a stdio client's ``tools/call`` lines for ``gateway`` (module docstring)."""

    def __init__(self, gateway: Gateway) -> None:
        self._gateway = gateway
        self._client: _Client | None = None
        self._in_flight: dict[types.RequestId, _Job] = {}
        self._idle: list[asyncio.Future[_Job]] = []
        """Where each idle worker waits for its next call (a future each: cheaper than a queue's get)."""
        self._stamp: dict[str, Any] | None = None
        self.relayed = 0
        """Calls answered here (tests check that the relay, not the SDK, served them)."""

    def learn(self, ctx: ServerRequestContext[Any, Any], session: Session) -> None:
        """Note the session the SDK path resolved for this client (``Gateway`` calls it per request)."""
        if (ctx.meta or {}).get(SESSION_META_KEY):
            return  # a session named by the request: not the one unnamed calls belong to
        modern = ctx.protocol_version in MODERN_PROTOCOL_VERSIONS
        caps = None if modern else ctx.session.client_capabilities
        can_be_asked = caps is not None and (caps.sampling is not None or caps.elicitation is not None)
        known = self._client
        if known is None or known.session is not session or known.version != ctx.protocol_version:
            self._client = _Client(session, modern, ctx.protocol_version, can_be_asked)

    @asynccontextmanager
    async def taking(self, out: LineWriter) -> AsyncIterator[Callable[[str], bool]]:
        """While in the context: a function that serves a line when it is for this relay (answered on
        ``out``) and says so (True); False leaves the line to the SDK. Called on the event loop, in a
        task or in the callback that hands a stdin line over (``stdio_pipes.read_ahead``)."""
        self._stamp = dict(self._gateway.server.server_info_stamp)
        serving = True

        def take(line: str) -> bool:
            # a substring test first: most lines are no call, and parsing them here would be waste
            return (
                serving
                and ('"tools/call"' in line or '"notifications/cancelled"' in line)
                and self._took(line, tg, out)
            )

        async with anyio.create_task_group() as tg:
            self._gateway.relay = self
            try:
                yield take
            finally:
                serving = False
                self._gateway.relay = None
                tg.cancel_scope.cancel()

    @asynccontextmanager
    async def serving(self, lines: AsyncIterable[str], out: LineWriter) -> AsyncIterator[AsyncIterator[str]]:
        """``lines`` without the calls this relay serves (answered on ``out``), while in the context."""
        async with self.taking(out) as take:
            yield self._others(lines, take)

    @staticmethod
    async def _others(lines: AsyncIterable[str], take: Callable[[str], bool]) -> AsyncIterator[str]:
        async for line in lines:
            if not take(line):
                yield line

    def _took(self, line: str, tg: anyio.abc.TaskGroup, out: LineWriter) -> bool:
        """Serve or apply ``line`` here when it is for the relay; False hands it to the SDK."""
        client = self._client
        if client is None:
            return False
        try:
            message = json.loads(line)
        except ValueError:
            return False
        if not isinstance(message, dict) or not message.keys() <= _MESSAGE_KEYS:
            return False
        if message.get("jsonrpc") != "2.0":
            return False
        method, params = message.get("method"), message.get("params")
        if method == "notifications/cancelled":
            return "id" not in message and self._cancel(params)
        request_id = message.get("id")
        if method != "tools/call" or not isinstance(params, dict) or not _is_id(request_id):
            return False
        version = self._version(client, params)
        name, arguments = params.get("name"), params.get("arguments")
        if (
            version is None
            or not isinstance(name, str)
            or name in _META_TOOLS
            or not (arguments is None or isinstance(arguments, dict))
            or progress_token_from_params(params) is not None  # the SDK's context sends its progress
            or not self._gateway.served.is_ready()
            or not self._gateway.sessions.holds(client.session)
        ):
            return False
        job = _Job(request_id, client.session, name, arguments, version)
        self._in_flight[coerce_request_id(request_id)] = job
        log.debug("relaying tools/call %r", request_id)  # which calls took this path (tests read it)
        while self._idle:  # a worker waits (the one idle last: its memory is warm): hand it over
            waiter = self._idle.pop()
            if not waiter.done():
                waiter.set_result(job)
                return True
        tg.start_soon(self._work, out, job)  # every worker is busy: one more, while the relay serves
        return True

    async def _work(self, out: LineWriter, job: _Job) -> None:
        """Serve ``job``, then every job handed to this worker while it waits idle.

        The calls a worker serves share one cancel scope (what a client's cancel cancels) until one of
        them is cancelled: a scope entered and left per call was a tenth of the relay's own work per
        call. A cancelled call's scope ends with it, so its cancellation reaches no later call."""
        while True:
            with cancel_scope() as scope:
                while True:
                    await self._serve(out, job, scope)
                    if scope.cancel_called:  # cancelled after its last wait: the scope ends here
                        break
                    job = await self._next_job()
            job = await self._next_job()

    async def _next_job(self) -> _Job:
        """Wait idle until a call is handed to this worker."""
        waiter: asyncio.Future[_Job] = asyncio.get_running_loop().create_future()
        self._idle.append(waiter)
        try:
            return await waiter
        except BaseException:  # cancelled (the relay stops): no call may be handed to it
            with suppress(ValueError):
                self._idle.remove(waiter)
            raise

    @staticmethod
    def _version(client: _Client, params: dict[str, Any]) -> str | None:
        """The protocol version to answer in, when the request is of the client's era and its params
        hold nothing the relay does not serve; None hands it to the SDK."""
        meta = params.get("_meta")
        if not params.keys() <= _PARAM_KEYS or not (meta is None or isinstance(meta, dict)):
            return None
        if not client.modern:
            if client.can_be_asked or (meta and types.PROTOCOL_VERSION_META_KEY in meta):
                return None
            return client.version
        if meta is None or meta.get(SESSION_META_KEY):
            return None
        info = meta.get(types.CLIENT_INFO_META_KEY)  # optional: the SDK accepts an envelope without it
        if not isinstance(meta.get(types.CLIENT_CAPABILITIES_META_KEY), dict) or not isinstance(
            info, dict | None
        ):
            return None  # the SDK names what is wrong
        version = meta.get(types.PROTOCOL_VERSION_META_KEY)
        return version if version in MODERN_PROTOCOL_VERSIONS else None

    def _cancel(self, params: Any) -> bool:
        """Cancel a relayed call the client gave up on; other ids are the SDK's."""
        rid = params.get("requestId") if isinstance(params, dict) else None
        job = self._in_flight.get(coerce_request_id(rid)) if _is_id(rid) else None
        if job is None:
            return False
        job.cancelled = True
        if job.scope is not None:  # a worker serves it (else the worker cancels it as it starts)
            job.scope.cancel()
        return True

    async def _serve(self, out: LineWriter, job: _Job, scope: anyio.CancelScope) -> None:
        """Serve ``job`` in the worker's ``scope``; a client's cancel ends it there, unanswered."""
        request_id, session = job.request_id, job.session
        key = coerce_request_id(request_id)
        answered = False
        job.scope = scope
        if job.cancelled:  # cancelled while handed over: it ends at its first wait, as a cancelled call
            scope.cancel()

        async def find_session() -> Session:
            return session

        try:
            try:
                result = await self._gateway.serve_call(find_session, job.name, job.arguments)
            finally:
                if self._in_flight.get(key) is job:  # a reused id's newer call stays
                    del self._in_flight[key]
            answered = True
            self.relayed += 1
            await out.write(self._answer(request_id, result, job.version))
        except anyio.get_cancelled_exc_class():
            # the client's cancel (the worker's scope catches it: a cancelled request is never
            # answered), or shutdown: the client is told, as the SDK tells it
            if not answered and not job.cancelled:
                closed = types.ErrorData(code=types.CONNECTION_CLOSED, message="Connection closed")
                with anyio.move_on_after(_SHUTDOWN_WRITE_S, shield=True), suppress(Exception):
                    await out.write(_line({"jsonrpc": "2.0", "id": request_id, "error": _error(closed)}))
            raise
        except Exception as exc:  # the client left: nobody to answer
            log.debug("could not answer tools/call %r: %s", request_id, exc)
        finally:
            self._gateway.calls.after_reply.run()  # what the call taught, now that its answer is out

    def _answer(self, request_id: types.RequestId, result: types.CallToolResult, version: str) -> str:
        """The response line, shaped as the SDK's runner shapes a handler's result (``_serialize``)."""
        wire = result.model_dump(by_alias=True, mode="json", exclude_none=True)
        try:
            wire = serialize_server_result("tools/call", version, wire)  # the era's result surface
        except ValidationError:
            log.exception("tools/call %r: the result does not fit the %s result surface", request_id, version)
            invalid = types.ErrorData(code=types.INTERNAL_ERROR, message="Handler returned an invalid result")
            return _line({"jsonrpc": "2.0", "id": request_id, "error": _error(invalid)})
        if version in MODERN_PROTOCOL_VERSIONS:
            wire.setdefault("resultType", "complete")
            meta = wire.get("_meta")
            if meta is None or (isinstance(meta, dict) and meta.get(SERVER_INFO_META_KEY) is None):
                wire["_meta"] = {**(meta or {}), SERVER_INFO_META_KEY: self._stamp}
        return _line({"jsonrpc": "2.0", "id": request_id, "result": wire})


def _is_id(value: Any) -> TypeGuard[types.RequestId]:
    return isinstance(value, int | str) and not isinstance(value, bool)


def _error(error: types.ErrorData) -> dict[str, Any]:
    return error.model_dump(by_alias=True, mode="json", exclude_none=True)


def _line(message: dict[str, Any]) -> str:
    return _to_json(message) + "\n"
