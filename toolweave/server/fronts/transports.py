"""Downstream transports: stdio, streamable HTTP (``/mcp``) and legacy HTTP+SSE (``/sse``).

All three serve both protocol eras (the client's first request decides). Backends live exactly as
long as the server: stdio enters the gateway's lifespan through ``Server.run``, streamable HTTP
through the SDK's session manager at app startup, SSE through the Starlette app's lifespan (not per
connection, which would restart every upstream for every client).

HTTP binds 127.0.0.1 by default. Host/Origin checks (DNS-rebinding protection) stay on for every bind:
loopback names, the bind address and ``security.allowed_hosts`` / ``allowed_origins`` are accepted.
A non-loopback bind needs authentication (``server/fronts/auth.py``) unless ``--insecure-no-auth`` says
otherwise. Both HTTP apps also serve Prometheus ``/metrics`` (behind the same authentication).
"""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
from functools import partial
from typing import Any, BinaryIO, Literal

import anyio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Mount, Route

from toolweave.adapters.backend import call_budget
from toolweave.errors import ServerError
from toolweave.server.fronts import handshake
from toolweave.server.fronts.auth import AuthMiddleware, authenticator_for
from toolweave.server.fronts.early import EarlyFront
from toolweave.server.fronts.front_answers import (
    DEFAULT_HOST,
    DEFAULT_PORT,
    WILDCARD_HOSTS,
    allowed_names,
    check_exposure,
)
from toolweave.server.fronts.handover import Era, Handover
from toolweave.server.fronts.host import host_channel, turn_route
from toolweave.server.fronts.http_front import GRACEFUL_SHUTDOWN_S, HttpFront
from toolweave.server.fronts.json_answers import answer_find_tools_as_json
from toolweave.server.fronts.limits import RequestSizeLimit, bounded_stdio_server
from toolweave.server.fronts.owed import DRAIN_MARGIN_S, Owed, OwingLines
from toolweave.server.fronts.processes import KEEP_ALIVE_S
from toolweave.server.fronts.relay import CallRelay
from toolweave.server.gateway import Gateway
from toolweave.server.heap import frozen_once_started
from toolweave.server.sessions.session_book import follow_processes
from toolweave.server.turns.notify import WrittenReplies, reporting_written, streamable_http_reach
from toolweave.server.turns.starting import answer_find_tools_while_starting
from toolweave.settings import SecuritySettings

__all__ = ["Transport", "check_exposure", "http_app", "serve", "sse_app"]

log = logging.getLogger(__name__)

Transport = Literal["stdio", "http", "sse"]


def _security(host: str, security: SecuritySettings) -> Any:
    from mcp.server.transport_security import TransportSecuritySettings

    hosts, origins = allowed_names(host, security.allowed_hosts, security.allowed_origins)
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins
    )


def _resource_url(host: str, port: int, path: str, security: SecuritySettings) -> str:
    if security.resource_url:
        return security.resource_url
    shown = "127.0.0.1" if host in WILDCARD_HOSTS else (f"[{host}]" if ":" in host else host)
    return f"http://{shown}:{port}{path}"


def _protect(app: Starlette, gateway: Gateway, host: str, port: int, path: str) -> Starlette:
    """Add ``/metrics`` and put authentication in front of every route."""
    security = gateway.settings.security
    app.router.routes.append(Route("/metrics", gateway.metrics.endpoint, methods=["GET"]))
    resource = _resource_url(host, port, path, security)
    authenticator = authenticator_for(security, resource)
    if authenticator is not None:
        issuer = security.oauth_issuer if security.auth == "oauth" else None
        app.add_middleware(AuthMiddleware, authenticator=authenticator, resource_url=resource, issuer=issuer)
    return app


def http_app(gateway: Gateway, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT) -> Starlette:
    """Streamable HTTP at ``/mcp`` (stateful, so handshake-era clients get list_changed)."""
    app = gateway.server.streamable_http_app(
        host=host, transport_security=_security(host, gateway.settings.security)
    )
    answer_find_tools_as_json(gateway.server.session_manager)  # the hot path without SSE (json_answers.py)
    # no holding a result for a re-list when the client has no GET stream to hear list_changed on
    gateway.notifier.channel_open = streamable_http_reach(gateway.server.session_manager)
    app.router.routes.append(turn_route(gateway))  # the host channel (server/fronts/host.py)
    # 2026-era requests name no session: where each client process begins and runs
    # (server/fronts/processes.py)
    gateway.server.middleware.append(follow_processes)
    app = _protect(app, gateway, host, port, "/mcp")
    app.add_middleware(RequestSizeLimit, max_bytes=gateway.settings.max_request_bytes)
    return app


def sse_app(gateway: Gateway, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT) -> Starlette:
    """Legacy HTTP+SSE: ``GET /sse`` opens the stream, ``POST /messages/`` carries requests."""
    from mcp.server.runner import serve_dual_era_loop
    from mcp.server.sse import SseServerTransport

    transport = SseServerTransport("/messages/", security_settings=_security(host, gateway.settings.security))

    async def handle_sse(request: Request) -> Response:
        async with transport.connect_sse(request.scope, request.receive, request._send) as (read, write):
            await serve_dual_era_loop(
                gateway.server,
                read,
                write,
                lifespan_state={},
                init_options=gateway.server.create_initialization_options(),
            )
        return Response()

    @asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        async with gateway.running():
            yield

    app = Starlette(
        routes=[
            Route("/sse", handle_sse, methods=["GET"]),
            Mount("/messages/", app=transport.handle_post_message),
            turn_route(gateway),  # the host channel (server/fronts/host.py)
        ],
        lifespan=lifespan,
    )
    app = _protect(app, gateway, host, port, "/sse")
    app.add_middleware(RequestSizeLimit, max_bytes=gateway.settings.max_request_bytes)
    return app


def _check_port(host: str, port: int) -> None:
    """Fail early with a clear message: uvicorn only logs a bind error and exits."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            raise ServerError(
                f"cannot listen on {host}:{port}: {exc.strerror or exc} (try another --port)"
            ) from exc


async def _serve_stdio(
    gateway: Gateway,
    early: EarlyFront | None = None,
    *,
    stdin: BinaryIO | None = None,
    stdout: BinaryIO | None = None,
    on_client_left: Callable[[], None] | None = None,
) -> None:
    """Serve one client on the process's stdin/stdout (or the given streams, for tests).
    ``on_client_left``: called (from a worker thread) when stdin ended and what the client asked before
    was answered (``server/fronts/owed.py``: a piped client closes stdin after its last request)."""
    # What the early front already read is read first; its answered requests are replayed under private
    # ids, so the SDK's session state is what it would be had it answered them itself.
    handover = early.hand_over() if early is not None else None
    source = stdin or sys.stdin.buffer
    owed = Owed()
    read_from = handover.reader(source) if handover is not None else source
    loop = asyncio.get_running_loop()
    sessions_told = partial(gateway.notifier.input_ended, gateway.sessions)  # nobody will re-list now
    told = partial(loop.call_soon_threadsafe, sessions_told)
    lines = OwingLines(read_from, owed, partial(_drain_s, gateway), on_client_left, on_input_end=told)
    max_bytes = gateway.settings.max_request_bytes
    replies = WrittenReplies()  # when a list reply is on the pipe (a held find_tools answer goes after it)
    # The host channel lets the host that spawned this gateway (our parent) report its user's turns.
    with replies.reporting():
        async with (
            bounded_stdio_server(
                max_bytes, stdin=lines, stdout=stdout, relay=CallRelay(gateway), owed=owed
            ) as (read, write),
            reporting_written(write, replies) as write,
            _without_early_replies(write, handover) as write,
            host_channel(gateway, listening=early.host_socket if early is not None else None),
        ):
            await gateway.server.run(read, write, gateway.server.create_initialization_options())


def _drain_s(gateway: Gateway) -> float:
    """How long the end of a stdio client's input waits for the answers it is owed: the longest budget
    a call may have (a source's own ``timeout_s`` may exceed ``call_timeout_s``), plus a margin."""
    default_s = gateway.settings.call_timeout_s
    # asked from the reader's thread: a copy of the backends, which the loop may add to meanwhile
    budgets = [call_budget(b.call_timeout_s, default_s) for b in list(gateway.sources.backends.values())]
    return max(budgets, default=default_s) + DRAIN_MARGIN_S


@asynccontextmanager
async def _without_early_replies(write: Any, handover: Handover | None) -> AsyncIterator[Any]:
    """``write``, minus the SDK's replies to requests the early front answered and its acknowledgements
    of listen streams the front acknowledged. Each is compared with what was sent: a ``tools/list``
    that changed since (a host's turn was applied, the manifest turned ``always_load`` off) is
    followed by ``list_changed``, so the client re-lists; any other difference is a bug, logged."""
    if handover is None or not (handover.answered or handover.listens):
        yield write
        return
    import mcp_types as types
    from mcp.shared._context_streams import create_context_streams
    from mcp.shared.message import SessionMessage

    pending = dict(handover.answered)
    listens = dict(handover.listens)
    send, receive = create_context_streams[SessionMessage](0)

    def list_changed() -> list[SessionMessage]:
        """The notices that reach this client: on the connection (handshake era), or on each listen
        stream the front opened (2026 era: a notice outside a stream is not heard)."""
        method = "notifications/tools/list_changed"
        if handover.era is not Era.MODERN:
            return [SessionMessage(types.JSONRPCNotification(jsonrpc="2.0", method=method))]
        return [
            SessionMessage(
                types.JSONRPCNotification(
                    jsonrpc="2.0", method=method, params={"_meta": {handshake.SUBSCRIPTION_ID_META: sid}}
                )
            )
            for sid in handover.listens
        ]

    def early_part(message: Any) -> list[SessionMessage] | None:
        """None to pass ``message`` on; else what to write instead (nothing, or list_changed)."""
        if isinstance(message, types.JSONRPCResponse | types.JSONRPCError) and message.id in pending:
            method, sent = pending.pop(str(message.id))
            wire = json.loads(message.model_dump_json(by_alias=True, exclude_unset=True))
            reply = {key: wire[key] for key in ("result", "error") if key in wire}
            if reply == sent:
                return []
            if method == "tools/list" and "result" in reply:
                return list_changed()
            if method == "tools/call":  # find_tools from the ready table: the gateway's list_changed follows
                return []
            log.error("the early answer to %s differs from the SDK's: %s != %s", method, sent, reply)
            return []
        if isinstance(message, types.JSONRPCNotification) and message.method == handshake.LISTEN_ACKNOWLEDGED:
            params = message.model_dump(by_alias=True, exclude_unset=True).get("params") or {}
            sid = (params.get("_meta") or {}).get(handshake.SUBSCRIPTION_ID_META)
            if sid in listens:
                sent = listens.pop(sid)
                if params != sent:
                    log.error("the early listen acknowledgement differs: %s != %s", sent, params)
                return []
        return None

    async def relay() -> None:
        async with receive:
            async for item in receive:
                instead = early_part(item.message)
                for message in [item] if instead is None else instead:
                    await write.send(message)

    async def relay_until_closed() -> None:
        with suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):  # the client left
            await relay()

    async with anyio.create_task_group() as tg:
        tg.start_soon(relay_until_closed)
        async with send:
            yield send


async def _serve_uvicorn(
    app: Starlette,
    gateway: Gateway,
    host: str,
    port: int,
    path: str,
    on_stop: Callable[[str], None] | None = None,
) -> None:
    import uvicorn

    class Server(uvicorn.Server):
        def handle_exit(self, sig: int, frame: Any) -> None:
            if on_stop is not None:
                on_stop(f"signal {sig}")
            super().handle_exit(sig, frame)

    # No access log: its lines are INFO, below the level shown, yet uvicorn formats each one's client
    # address and path before the logger drops it (~2 % of a cached find_tools under load).
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level="warning",
        lifespan="on",
        access_log=False,
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S,
        timeout_keep_alive=int(KEEP_ALIVE_S),  # an idle connection's port names it this long (processes.py)
    )
    server = Server(config)
    log.info("serving MCP on http://%s:%d%s", host, port, path)
    async with frozen_once_started(gateway):  # full GC passes stalled every session (server/heap.py)
        await server.serve()


def serve(
    gateway: Gateway,
    transport: Transport,
    *,
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    early: EarlyFront | None = None,
    front: HttpFront | None = None,
    on_stop: Callable[[str], None] | None = None,
) -> None:
    """Run the gateway until the client disconnects (stdio) or the process is interrupted (HTTP).
    ``early``: the stdio front that answered the handshake so far (``server/fronts/early.py``); ``front``: the
    HTTP front serving the port already (``server/fronts/http_front.py``). ``on_stop``: told (from any thread)
    the moment the way out begins: stdin ended, or a signal came."""
    answer_find_tools_while_starting(gateway)  # a client's short request timeout must not meet start-up
    if transport == "stdio":
        gateway.metrics.serve_port(gateway.settings.metrics_port)
        left = None if on_stop is None else partial(on_stop, "the client closed stdin")
        anyio.run(partial(_serve_stdio, gateway, early, on_client_left=left))
        return
    if transport not in ("http", "sse"):
        raise ServerError(f"unknown transport {transport!r}; expected stdio, http or sse")
    check_exposure(host, gateway.settings.security)
    if front is not None:
        if transport == "http" and front.usable():
            log.info("serving MCP on http://%s:%d/mcp", host, port)
            _serve_behind_front(front, http_app(gateway, host, port), gateway, on_stop)
            return
        front.release()
    _check_port(host, port)
    app = http_app(gateway, host, port) if transport == "http" else sse_app(gateway, host, port)
    path = "/mcp" if transport == "http" else "/sse"
    serving = partial(_serve_uvicorn, app, gateway, host, port, path, on_stop)
    anyio.run(serving, backend_options=_loop_options())


def _serve_behind_front(
    front: HttpFront, app: Starlette, gateway: Gateway, on_stop: Callable[[str], None] | None
) -> None:
    """Hand ``app`` to the front that serves the port (its server runs in the front's thread), and wait
    until it stops; signals arrive here, in the main thread, and are passed on."""
    import signal

    @asynccontextmanager
    async def lifespan() -> AsyncIterator[None]:
        async with frozen_once_started(gateway), app.router.lifespan_context(app):
            yield

    front.attach(app, lifespan, on_stop)
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda number, _frame: front.stop(number))
    front.wait()
    if front.failed is not None:
        raise front.failed


def _loop_options() -> dict[str, bool]:
    """uvloop when installed (a dependency): under 50 concurrent sessions the event loop and the HTTP
    layer are most of a cached find_tools' CPU time, and uvloop (with uvicorn's httptools parser, which
    uvicorn picks by itself) roughly halves that part."""
    try:
        import uvloop  # noqa: F401
    except ImportError:
        return {}
    return {"use_uvloop": True}
