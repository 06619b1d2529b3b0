"""One upstream MCP server (stdio, streamable HTTP or SSE) as a toolweave ``Backend``.

``run`` is the owner task: the SDK's ``Client`` must be entered and exited in one task, so each
upstream gets exactly one, which connects, lists every tool, reports them, stays in sync and
reconnects with exponential backoff. ``call`` may be used from any task while ``run`` is alive.

Staying in sync, in both protocol eras:

* handshake era (≤ 2025-11-25): ``notifications/tools/list_changed`` reaches ``message_handler``;
* 2026-07-28 era: changes travel only on a ``subscriptions/listen`` stream, opened when the upstream
  advertises ``tools.listChanged`` (its frames are also teed to ``message_handler``; refreshes are
  coalesced, so a change is listed once or twice, never lost);
* always: a re-list right after (re)connecting, since some servers announce changes before any
  listener exists; HTTP/SSE upstreams are also re-listed every ``probe_interval_s`` (change polling
  for servers that never notify).

Change notices are debounced: one refresher task, which waits ``list_debounce_s`` after a notice and
swallows every notice that arrived meanwhile, so a server sending list_changed 100x/s costs at most
about two re-lists per second, never two at once.

Liveness: every ``ping_interval_s``, and at once when a call times out, the upstream must answer a
ping (handshake era; ``tools/list`` in the 2026 era, which has no ping) within ``ping_timeout_s``;
otherwise it is marked lost and reconnected (a stdio process is stopped and started again).

Transports are bounded (``transports.py``): stdio output is decoded per line (invalid UTF-8 replaced, noise
counted and logged once per burst, garbled answers fail their call at once) and no answer is read
past ``max_result_bytes`` on stdio or streamable HTTP (the call fails with a clear note instead).

Losing an upstream (process exit, failed probe, connection error in a call) makes ``available``
False and awaits ``on_status(name, False)`` so the server can stop publishing that source; when it is
back, tools are re-listed and reported, then ``on_status(name, True)``.

Sampling and elicitation: an upstream's ``sampling/createMessage`` or ``elicitation/create``
(handshake era) or ``InputRequiredResult`` (2026 era, driven by ``Client.call_tool``) is answered by the
``sampler`` or ``elicitor`` of the call in progress (``asks.py``). Without one, the upstream gets an
error saying the client cannot. Elicitation is declared to the upstream unless its entry says
``elicitation: false``. Roots are not forwarded: one upstream session serves clients of many roots.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import time
from collections.abc import Mapping
from contextlib import AbstractAsyncContextManager, nullcontext
from functools import partial
from typing import Any, Unpack

import anyio
import mcp_types as types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp import Client, StdioServerParameters
from mcp.client.sse import sse_client
from mcp.client.streamable_http import DEFAULT_MAX_SSE_EVENT_SIZE, streamable_http_client
from mcp.client.subscriptions import SubscriptionLost
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from toolweave.adapters.backend import (
    CallOptions,
    PausedBudget,
    ProgressInOrder,
    StatusCallback,
    ToolsCallback,
    call_budget,
)
from toolweave.adapters.mcp.asks import ClientAsks, asks_client
from toolweave.adapters.mcp.config import HttpServer, SseServer, StdioServer, stdio_environment
from toolweave.adapters.mcp.convert import tools_to_records
from toolweave.adapters.mcp.raw import RawCalls, UpstreamClosed
from toolweave.adapters.mcp.transports import bounded_stdio_client, capped_http_client
from toolweave.call_errors import tool_error_result
from toolweave.config_values import references
from toolweave.errors import ConfigError, UpstreamTimeout
from toolweave.records import ToolRecord
from toolweave.redaction import unexpand

__all__ = ["MCPBackend", "StatusCallback"]

log = logging.getLogger(__name__)


MAX_PAGES = 1000
"""A paginator that never ends must not hang the gateway."""


def _asked(body: dict[str, Any]) -> str:
    """What an ``input_required`` answer asks the client for, as its error names it."""
    requests = body.get("inputRequests")
    methods = (
        {r.get("method") for r in requests.values() if isinstance(r, dict)}
        if isinstance(requests, dict)
        else set()
    )
    return "elicitation" if methods == {"elicitation/create"} else "sampling"


class MCPBackend:
    """An upstream MCP server. See the module docstring for the lifecycle.

    Args:
        name: source name, the tool id prefix.
        config: the manifest entry; ``${VAR}`` in it is resolved at every connect, never stored.
        connect_timeout_s: connect + initialise + first listing (the entry's own value wins).
        call_timeout_s: the gateway's call budget, for calls given none (``call_budget``: the entry's
            ``timeout_s`` wins).
        max_result_bytes: an answer larger than this (stdio line, HTTP body) is cut while streaming.
        ping_interval_s, ping_timeout_s: liveness check period and deadline.
        list_debounce_s: quiet time before a re-list after a change notice (see the module docstring).
        on_status: awaited with ``(name, available)`` whenever availability changes.
        probe_interval_s: re-list period for liveness/changes; default 15 s for HTTP/SSE, off for
            stdio (a dead process closes the pipe, which is noticed within ~0.25 s).
        backoff_initial_s, backoff_max_s, healthy_after_s: reconnect delay starts at the first,
            doubles to the second, and resets once a connection stayed up for the third.
        environ: where ``${VAR}`` is looked up (default ``os.environ``).
    """

    def __init__(
        self,
        name: str,
        config: StdioServer | HttpServer | SseServer,
        *,
        connect_timeout_s: float = 20.0,
        call_timeout_s: float = 60.0,
        max_result_bytes: int = 4 * 1024 * 1024,
        ping_interval_s: float = 15.0,
        ping_timeout_s: float = 5.0,
        list_debounce_s: float = 0.5,
        on_status: StatusCallback | None = None,
        probe_interval_s: float | None = None,
        backoff_initial_s: float = 0.5,
        backoff_max_s: float = 30.0,
        healthy_after_s: float = 60.0,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self.name = name
        self.config = config
        self.connect_timeout_s = config.connect_timeout_s or connect_timeout_s
        self.call_timeout_s = config.timeout_s
        """The entry's own call budget (None: the gateway's applies, ``call_budget``)."""
        self._default_call_s = call_timeout_s
        self.max_result_bytes = max_result_bytes
        self.ping_interval_s = ping_interval_s
        self.ping_timeout_s = ping_timeout_s
        self.list_debounce_s = list_debounce_s
        self.relists = 0
        """Re-lists after connecting (change notices, probes): how storms are measured."""
        self._cuts = 0  # HTTP answers cut at max_result_bytes, to name the reason of the failed call
        self._ping_now: anyio.Event | None = None
        self.on_status = on_status
        if probe_interval_s is None and not isinstance(config, StdioServer):
            probe_interval_s = 15.0
        self.probe_interval_s = probe_interval_s
        self.backoff_initial_s = backoff_initial_s
        self.backoff_max_s = backoff_max_s
        self.healthy_after_s = healthy_after_s
        self.environ = environ
        self.last_error: str | None = None
        """Why the upstream is (or last was) unavailable; None while healthy."""
        self.records: list[ToolRecord] = []
        """The tools as last reported."""
        self.protocol_version: str | None = None
        self._client: Client | None = None
        self._available = False
        self._reported_status = False
        self._changed: anyio.Event | None = None
        self._lost: anyio.Event | None = None
        self._lost_reason = ""
        self._refresh_send: MemoryObjectSendStream[None] | None = None
        self._asks = ClientAsks(name)
        self._connected_at: float | None = None
        self._raw: RawCalls | None = None

    def __repr__(self) -> str:
        return f"MCPBackend({self.name!r}, {self.config.describe()!r}, available={self._available})"

    @property
    def available(self) -> bool:
        return self._available

    # -- owner task ------------------------------------------------------------------------------
    async def run(self, on_tools: ToolsCallback) -> None:
        backoff = self.backoff_initial_s
        while True:
            self._connected_at = None
            try:
                await self._serve_once(on_tools)
                reason = self._lost_reason or "connection closed"
            except ConfigError as exc:
                reason = str(exc)
            except Exception as exc:  # any failure of one connection: reconnect
                reason = self._describe(exc)
            finally:
                self._client = None
                await self._set_available(False)
            up_for = self._uptime()
            if up_for is not None and up_for >= self.healthy_after_s:
                backoff = self.backoff_initial_s
            self.last_error = reason
            log_fn = log.warning if up_for is not None else log.error
            log_fn(
                "upstream %r (%s): %s; retrying in %.1f s", self.name, self.config.describe(), reason, backoff
            )
            await anyio.sleep(backoff)
            backoff = min(backoff * 2, self.backoff_max_s)

    def _uptime(self) -> float | None:
        """Seconds the last connection stayed up (None: it never connected)."""
        return None if self._connected_at is None else time.monotonic() - self._connected_at

    async def _serve_once(self, on_tools: ToolsCallback) -> None:
        """One connection: connect, list, report, then keep in sync until it is lost."""
        target, http = self._target()
        self._lost = anyio.Event()
        self._lost_reason = ""
        send, receive = anyio.create_memory_object_stream[None](1)
        self._refresh_send = send
        client = Client(
            target,
            mode=self.config.protocol,
            message_handler=self._on_message,
            sampling_callback=self._asks.sample,
            elicitation_callback=self._asks.elicit if self.config.elicitation else None,
        )
        # A scope with a deadline, relaxed once connected: a cancel scope cannot end while the
        # Client's task groups (entered inside it) are still open, so `fail_after` around
        # `__aenter__` alone is not possible.
        with anyio.CancelScope(deadline=anyio.current_time() + self.connect_timeout_s) as scope:
            # the streams first: a connection that fails to open must still close them
            async with send, receive, http, client:
                tools = await self._list(client)
                scope.deadline = math.inf
                self.protocol_version = client.protocol_version
                self._client = client
                self._connected_at = time.monotonic()
                records = records_without_values(self.name, tools, self.config, self.environ)
                await self._report(on_tools, records)
                self.last_error = None
                await self._set_available(True)
                log.info(
                    "upstream %r connected (protocol %s, %d tools)",
                    self.name,
                    client.protocol_version,
                    len(self.records),
                )
                async with anyio.create_task_group() as tg:
                    tg.start_soon(self._refresher, client, receive, on_tools)
                    tg.start_soon(self._watch, client, on_tools)
                    caps = client.server_capabilities.tools
                    if client.protocol_version in MODERN_PROTOCOL_VERSIONS and caps and caps.list_changed:
                        tg.start_soon(self._listen, client)
                    await self._lost.wait()
                    tg.cancel_scope.cancel()
        if scope.cancelled_caught:
            raise UpstreamTimeout(
                f"no answer to initialize/tools/list within {self.connect_timeout_s:g} s (connect timeout)"
            )

    def _target(self) -> tuple[Any, AbstractAsyncContextManager[Any]]:
        """The SDK client target, plus the HTTP client to close with it (headers need our own).

        Secrets are interpolated here, on every connect, and live only in these transport objects.
        A stdio server gets the SDK's minimal environment (PATH, HOME, ...) plus the entry's ``env``:
        variables it needs from ours must be listed there (``TOKEN: ${TOKEN}``). Its PATH starts with
        this interpreter's bin directory (``stdio_environment``).
        """
        cfg = self.config.interpolated(self.environ)
        self._raw = None
        if isinstance(cfg, StdioServer):
            env = stdio_environment(cfg.env, os.environ.get("PATH", ""))
            params = StdioServerParameters(command=cfg.command, args=cfg.args, env=env, cwd=cfg.cwd)
            label = f"upstream {self.name!r}"
            self._raw = RawCalls()  # this connection's own: a reconnect starts with no open call
            return bounded_stdio_client(
                params, label=label, max_line_bytes=self.max_result_bytes, raw=self._raw
            ), nullcontext()
        if isinstance(cfg, SseServer):
            return sse_client(
                cfg.url, headers=cfg.headers or None, timeout=self.connect_timeout_s
            ), nullcontext()
        http = capped_http_client(
            headers=cfg.headers or None, max_bytes=self.max_result_bytes, on_cut=self._cut
        )
        event_cap = max(DEFAULT_MAX_SSE_EVENT_SIZE, self.max_result_bytes)
        return streamable_http_client(cfg.url, http_client=http, max_sse_event_size=event_cap), http

    def _cut(self) -> None:
        self._cuts += 1

    async def _list(self, client: Client) -> list[types.Tool]:
        tools: list[types.Tool] = []
        cursor: str | None = None
        seen: set[str] = set()
        for _ in range(MAX_PAGES):
            page = await client.list_tools(cursor=cursor, cache_mode="bypass")
            tools.extend(page.tools)
            cursor = page.next_cursor
            if not cursor or cursor in seen:
                return tools
            seen.add(cursor)
        log.warning("upstream %r: stopped listing after %d pages", self.name, MAX_PAGES)
        return tools

    async def _refresh(self, client: Client, on_tools: ToolsCallback, *, only_if_changed: bool) -> bool:
        """Re-list; report (and return True) unless ``only_if_changed`` and nothing changed."""
        with anyio.fail_after(self.connect_timeout_s):
            tools = await self._list(client)
        self.relists += 1
        records = records_without_values(self.name, tools, self.config, self.environ)
        if only_if_changed and records == self.records:
            return False
        await self._report(on_tools, records)
        return True

    async def _report(self, on_tools: ToolsCallback, records: list[ToolRecord]) -> None:
        self.records = records
        try:
            await on_tools(self.name, records, [])
        except Exception:  # the consumer's failure (registry, embedding) must not cost the connection
            log.exception("upstream %r: on_tools callback failed for %d tools", self.name, len(records))

    async def _refresher(
        self, client: Client, receive: MemoryObjectReceiveStream[None], on_tools: ToolsCallback
    ) -> None:
        async for _ in receive:
            # Debounce: let a burst of notices settle, then list once for all of them.
            await anyio.sleep(self.list_debounce_s)
            while True:
                try:
                    receive.receive_nowait()
                except anyio.WouldBlock:
                    break
            try:
                if await self._refresh(client, on_tools, only_if_changed=True):
                    log.info("upstream %r: tool list changed, %d tools", self.name, len(self.records))
            except Exception as exc:  # any failure means the session is gone
                self._mark_lost(f"re-listing tools after list_changed failed: {self._describe(exc)}")

    async def _watch(self, client: Client, on_tools: ToolsCallback) -> None:
        next_probe = time.monotonic() + (self.probe_interval_s or math.inf)
        next_ping = time.monotonic() + self.ping_interval_s
        self._ping_now = anyio.Event()
        while True:
            with anyio.move_on_after(0.25):
                await self._ping_now.wait()
            if _dispatcher_closed(client):
                self._mark_lost("connection closed (the server exited or closed the stream)")
                return
            if self._ping_now.is_set() or time.monotonic() >= next_ping:
                self._ping_now = anyio.Event()
                if not await self._alive(client):
                    return
                next_ping = time.monotonic() + self.ping_interval_s
            if time.monotonic() >= next_probe:
                try:
                    await self._refresh(client, on_tools, only_if_changed=True)
                except Exception as exc:  # any failure means the session is gone
                    self._mark_lost(f"liveness probe (tools/list) failed: {self._describe(exc)}")
                    return
                next_probe = time.monotonic() + (self.probe_interval_s or math.inf)

    async def _alive(self, client: Client) -> bool:
        """One liveness check with a deadline; a failure marks the upstream lost (it is reconnected)."""
        try:
            with anyio.fail_after(self.ping_timeout_s):
                if client.protocol_version in MODERN_PROTOCOL_VERSIONS:
                    await client.list_tools(cache_mode="bypass")  # the 2026 era has no ping
                else:
                    await client.session.send_request(types.PingRequest(), types.EmptyResult)
        except TimeoutError:
            self._mark_lost(f"no answer to a liveness check within {self.ping_timeout_s:g} s (stuck?)")
            return False
        except Exception as exc:  # any failure means the session is gone
            self._mark_lost(f"liveness check failed: {self._describe(exc)}")
            return False
        return True

    def _check_liveness_soon(self) -> None:
        if self._ping_now is not None:
            self._ping_now.set()

    async def _listen(self, client: Client) -> None:
        try:
            async with client.listen(tools_list_changed=True) as sub:
                async for _event in sub:
                    self._request_refresh()
        except SubscriptionLost as exc:
            self._mark_lost(f"change stream lost: {exc}")
            return
        except MCPError as exc:
            # Advertised listChanged but cannot listen: keep serving, changes come from probes only.
            log.warning("upstream %r: cannot listen for tool changes (%s)", self.name, exc)
            return
        self._mark_lost("the upstream closed its change stream")

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            self._request_refresh()
        elif isinstance(message, Exception):
            log.debug("upstream %r: transport error: %s", self.name, message)

    def _request_refresh(self) -> None:
        if self._refresh_send is None:
            return
        try:
            self._refresh_send.send_nowait(None)
        except anyio.WouldBlock:
            pass  # a refresh is already queued; it will see this change too
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass

    def _mark_lost(self, reason: str) -> None:
        if self._lost is not None and not self._lost.is_set():
            self._lost_reason = reason
            self._lost.set()
            # Calls see it at once; on_status follows when the owner task has closed the session.
            self._available = False

    async def _set_available(self, value: bool) -> None:
        self._available = value
        if self._changed is not None:
            self._changed.set()
            self._changed = None
        if value == self._reported_status:
            return
        self._reported_status = value
        if self.on_status is not None:
            try:
                await self.on_status(self.name, value)
            except Exception:  # a consumer bug must not cost the connection
                log.exception("upstream %r: on_status callback failed", self.name)

    # -- calls -----------------------------------------------------------------------------------
    async def call(
        self, tool: ToolRecord, arguments: dict[str, Any], **options: Unpack[CallOptions]
    ) -> types.CallToolResult:
        upstream_tool = str(tool.backend.get("tool", tool.name))
        timeout = options.get("timeout_s") or call_budget(self.call_timeout_s, self._default_call_s)
        # One budget for the whole call: a wait for a reconnecting upstream comes out of it (before,
        # each got the full budget, and a 5 s call on an upstream coming back took 10 s)
        # the running loop's clock is anyio's on its asyncio backend, without asking sniffio which runs
        deadline = asyncio.get_running_loop().time() + timeout
        label = f"upstream {self.name!r}, tool {upstream_tool!r}"
        client = await self._wait_client(min(self.connect_timeout_s, timeout))
        if client is None:
            return tool_error_result(
                "unavailable", f"{label}: not connected ({self.last_error or 'still connecting'})"
            )
        modern = client.protocol_version in MODERN_PROTOCOL_VERSIONS
        raw = self._raw
        progress = ProgressInOrder(given) if (given := options.get("progress")) is not None else None
        # the raw path sends no progress token and hears no request to the client: the SDK's path does
        if raw is not None and progress is None and not asks_client(options) and raw.serves(modern):
            return await self._call_raw(
                raw, client, upstream_tool, arguments, (deadline, timeout), label, modern
            )
        cuts = self._cuts
        try:
            with anyio.fail_after(max(deadline - anyio.current_time(), 0.0)) as scope:
                asking = options
                if asks_client(options):
                    # the time the client takes to answer the upstream's questions is not the upstream's
                    budget = PausedBudget(lambda: scope.deadline, partial(setattr, scope, "deadline"))
                    asking = {
                        "sampler": budget.pausing(options.get("sampler")),
                        "elicitor": budget.pausing(options.get("elicitor")),
                    }
                with self._asks.during(asking):
                    result = await client.call_tool(upstream_tool, arguments, progress_callback=progress)
        except TimeoutError:
            self._check_liveness_soon()  # a stuck upstream must not make every later call wait too
            return tool_error_result("timeout", f"{label}: no answer within {timeout:g} s (call timeout)")
        except MCPError as exc:
            if self._cuts != cuts:  # our own cap ended the answer: not a lost connection
                return tool_error_result(
                    "upstream_error",
                    f"{label}: the answer is larger than {self.max_result_bytes:,} bytes (max_result_bytes); "
                    "it was cut off while streaming",
                )
            if exc.code == types.CONNECTION_CLOSED:
                self._mark_lost("connection closed during a call")
                return tool_error_result(
                    "upstream_error", f"{label}: connection to the upstream was lost during the call"
                )
            self._request_refresh()  # transports report lost links as JSON-RPC errors: re-list now
            return tool_error_result("upstream_error", f"{label}: upstream error {exc.code}: {exc.message}")
        except Exception as exc:  # SDK/transport errors vary: one error result
            self._request_refresh()  # a failure of the re-list marks the upstream lost
            return tool_error_result("upstream_error", f"{label}: call failed: {self._describe(exc)}")
        if progress is not None:
            await progress.settled()
        return result

    async def _call_raw(
        self,
        raw: RawCalls,
        client: Client,
        tool: str,
        arguments: dict[str, Any],
        budget: tuple[float, float],
        label: str,
        modern: bool,
    ) -> types.CallToolResult:
        """``call`` on a stdio upstream without the SDK client's per-request machinery (``raw.py``):
        the same answers as ``Client.call_tool`` gives, and the same error results for its failures.
        ``budget``: the call's deadline (anyio's clock) and its whole budget in seconds."""
        log.debug("%s: raw tools/call", label)  # which calls took this path (tests read it)
        deadline, timeout = budget
        try:
            # the deadline travels with the call (a timer on its answer's future): no cancel scope per call
            answer = await raw.call(tool, arguments, modern=modern, deadline=deadline)
        except TimeoutError:
            self._check_liveness_soon()
            return tool_error_result("timeout", f"{label}: no answer within {timeout:g} s (call timeout)")
        except UpstreamClosed:
            self._mark_lost("connection closed during a call")
            return tool_error_result(
                "upstream_error", f"{label}: connection to the upstream was lost during the call"
            )
        error = answer.get("error")
        if error is not None:
            code = error.get("code") if isinstance(error, dict) else None
            message = error.get("message") if isinstance(error, dict) else error
            self._request_refresh()  # a failure of the re-list marks the upstream lost
            return tool_error_result("upstream_error", f"{label}: upstream error {code}: {message}")
        body = answer["result"]
        try:
            if isinstance(body, dict) and body.get("resultType") == "input_required":
                # the SDK client would ask its callbacks, which have no answerer for this call
                raise MCPError(
                    code=types.INVALID_REQUEST, message=f"{_asked(body)} not supported by the client"
                )
            result = types.CallToolResult.model_validate(body, by_name=False)
            # the output-schema check ``Client.call_tool`` makes (a plain schema's quick check first)
            if not result.is_error and not raw.quick_valid(client.session, tool, result):
                await client.session.validate_tool_result(tool, result)
        except MCPError as exc:
            return tool_error_result("upstream_error", f"{label}: upstream error {exc.code}: {exc.message}")
        except Exception as exc:  # a result that is no tools/call result, or breaks its output schema
            return tool_error_result("upstream_error", f"{label}: call failed: {self._describe(exc)}")
        return result

    async def _wait_client(self, wait_s: float) -> Client | None:
        if self._available and self._client is not None:  # the usual case: no cancel scope per call
            return self._client
        with anyio.move_on_after(wait_s):
            while not (self._available and self._client is not None):
                if self._changed is None:
                    self._changed = anyio.Event()
                await self._changed.wait()
        return self._client if self._available else None

    def _describe(self, exc: BaseException) -> str:
        """A one-line reason naming what failed, for logs and is_error results."""
        while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
            exc = exc.exceptions[0]
        if isinstance(exc, FileNotFoundError) and isinstance(self.config, StdioServer):
            return f"command {self.config.command!r} not found (is it installed and on PATH?)"
        if isinstance(exc, PermissionError) and isinstance(self.config, StdioServer):
            return f"command {self.config.command!r} cannot be executed: {exc.strerror}"
        if isinstance(exc, UpstreamTimeout | ConfigError):
            return str(exc)
        if isinstance(exc, MCPError):
            return f"MCP error {exc.code}: {exc.message}"
        text = str(exc) or type(exc).__name__
        return f"{type(exc).__name__}: {text}" if type(exc).__name__ not in text else text


def _dispatcher_closed(client: Client) -> bool:
    """True once the session's receive loop saw EOF. The SDK exposes no public signal for this, so
    we read the dispatcher's flag; if that attribute ever disappears, probes still catch the loss."""
    dispatcher = getattr(client.session, "_dispatcher", None)
    return bool(getattr(dispatcher, "_closed", False))


def records_without_values(
    name: str,
    tools: list[types.Tool],
    config: StdioServer | HttpServer | SseServer,
    environ: Mapping[str, str] | None,
) -> list[ToolRecord]:
    """An upstream's tools as records, with any value of its entry's ``${VARS}`` (a token in its URL,
    a header, an env value the server echoes in a description) put back as its reference: records go
    to the shared registry."""
    records = tools_to_records(name, tools)
    found = references(config.model_dump(), os.environ if environ is None else environ)
    if not found:
        return records
    return [ToolRecord.model_validate(unexpand(r.model_dump(), found)) for r in records]
