"""The gateway: one MCP server in front of many backends, publishing per session what the task needs.

``Gateway`` wires the SDK's low-level ``Server`` (handlers as constructor arguments) to three parts,
and dispatches each request to them:

- ``SourceSync`` (``server/sources.py``): the backends and catalogs, kept in sync with the registry;
  availability, first connections, stale sources, re-publishing when an upstream changes.
- ``TurnEngine`` (``server/turns/engine.py``): what a turn publishes (``find_tools``, host turns, next steps
  after a call), with the ``find_tools`` cache and notify-and-hold.
- ``CallPath`` (``server/calls/call_path.py``): one proxied call, and the one place its success is reported.

What stays here: the list and call handlers, meta-tool dispatch, metrics and audit of every turn, and
the lifetime. ``running()`` owns every background task: one owner task per backend, started in a task
group, cancelled on the way out. Instant start: the registry opens in the background (``Served``,
``server/served.py``) while ``initialize`` and ``tools/list`` (meta-tools) are answered at once; only
``find_tools`` and calls wait, bounded, for it, and a registry that cannot be opened makes them return
a clear error instead.

Nothing raised while serving a call escapes as a JSON-RPC error: see ``toolweave/call_errors.py``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, Literal

import anyio
import mcp_types as types
from mcp.server import NotificationOptions, Server, ServerRequestContext

from toolweave.adapters.backend import Backend
from toolweave.call_errors import tool_error_result
from toolweave.manifest import Manifest
from toolweave.policy import Policy
from toolweave.records import ToolRecord
from toolweave.server.calls.audit import AuditLog
from toolweave.server.calls.back_channel import back_channel
from toolweave.server.calls.call_path import CallPath, observe_turn
from toolweave.server.calls.metrics import GatewayMetrics
from toolweave.server.calls.proxy import Proxy, argument_errors
from toolweave.server.fronts.auth import identity_of_request
from toolweave.server.fronts.handshake import INSTRUCTIONS, SERVER_NAME, listed_ready_tool, server_version
from toolweave.server.served import REGISTRY_WAIT_S, Served
from toolweave.server.sessions.session_book import Session, SessionStore
from toolweave.server.sources import SourceSync
from toolweave.server.turns.engine import MAX_QUERY_CHARS, TurnEngine
from toolweave.server.turns.find_cache import FindCache
from toolweave.server.turns.meta_tools import (
    ALWAYS_LOAD,
    CALL_TOOL,
    FIND_TOOLS,
    MAX_K,
    META_INPUT_SCHEMAS,
    find_tools_result,
    meta_arguments,
    meta_tools,
    plain_find_tools_arguments,
    to_mcp_tool,
)
from toolweave.server.turns.names import NameMap
from toolweave.server.turns.notify import Notifier
from toolweave.settings import Settings
from toolweave.tracing import span

if TYPE_CHECKING:  # the registry (LanceDB, numpy, networkx) is imported in the background start
    from toolweave.registry import Registry
    from toolweave.server.fronts.relay import CallRelay
    from toolweave.server.turns.ready_index import ReadyIndex

__all__ = ["Gateway"]

log = logging.getLogger(__name__)


class Gateway:
    """Serve ``registry``'s tools through ``backends`` to MCP clients, one published set per session."""

    def __init__(
        self,
        registry: Registry | Callable[[], Registry],
        backends: Sequence[Backend],
        settings: Settings,
        *,
        manifest: Manifest | None = None,
        name: str = SERVER_NAME,
    ) -> None:
        self.settings = settings
        self.manifest = manifest
        security = settings.security
        self.metrics = GatewayMetrics()
        # An opener is called in the background start; the registry's guard comes with it.
        self.served = Served(
            registry, security, manifest.access_policy if manifest else Policy(), self.metrics
        )
        self.sessions = SessionStore.from_settings(settings)
        self.notifier = Notifier()
        self.names = NameMap(
            settings.publish.name_budget, lambda: (t.id for t in self.served.registry.tools())
        )
        self.find_cache: FindCache[list[Any]] = FindCache(settings.find_cache_size)
        self.sources = SourceSync(
            backends,
            settings,
            manifest,
            served=self.served,
            sessions=self.sessions,
            notifier=self.notifier,
            metrics=self.metrics,
            find_cache=self.find_cache,
        )
        self.turns = TurnEngine(
            settings,
            served=self.served,
            sources=self.sources,
            sessions=self.sessions,
            notifier=self.notifier,
            names=self.names,
            find_cache=self.find_cache,
        )
        self.proxy = Proxy(
            self.sources.backends,
            timeout_s=settings.call_timeout_s,
            max_result_chars=settings.max_result_chars,
        )
        self.calls = CallPath(
            served=self.served,
            sources=self.sources,
            turns=self.turns,
            sessions=self.sessions,
            proxy=self.proxy,
            names=self.names,
        )
        self._tool_cache: dict[str, tuple[ToolRecord, types.Tool]] = {}
        # Claude Code 2.1 otherwise shows the model only the names of MCP tools, behind its own
        # ToolSearch: neither find_tools nor a tool just published would be callable next step.
        self._tool_meta = dict(ALWAYS_LOAD) if settings.publish.always_load else None
        self.audit = (
            AuditLog(
                security.audit_log,
                values=security.audit_values,
                max_bytes=security.audit_max_bytes,
                backups=security.audit_backups,
            )
            if security.audit_log is not None
            else None
        )
        self.relay: CallRelay | None = None
        """The stdio relay serving ``tools/call`` lines around the SDK, while one is attached."""
        self.ready_tools: ReadyIndex | Literal[False] | None = None
        """The ready table ``find_tools`` is answered from while the gateway starts
        (``server/turns/starting.py``): None until first needed, False when there is none."""
        self.provisional: dict[str, str] = {}  # session → request the table answered: settle_provisional
        self.settle_error: BaseException | None = None
        """Why the manifest's start-up writes failed last (None: done, or not tried yet)."""
        self.warmed = anyio.Event()
        """Set once the ready gateway also loaded its embedding model (``server/heap.py`` waits for it)."""
        self.server: Server[Any] = Server(
            name,
            version=server_version(),
            instructions=INSTRUCTIONS,
            lifespan=self._lifespan,
            get_tool_input_schema=self._input_schema,
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
            on_subscriptions_listen=self._listen,
        )
        # Advertise tools.listChanged on every transport: the streamable-HTTP session manager calls
        # create_initialization_options() without arguments, so the default itself must change.
        default_options = self.server.create_initialization_options

        def with_list_changed(
            notification_options: NotificationOptions | None = None, *a: Any, **k: Any
        ) -> Any:
            return default_options(notification_options or NotificationOptions(tools_changed=True), *a, **k)

        # the SDK has no public way to announce list_changed by default (third-party gap)
        self.server.create_initialization_options = with_list_changed  # type: ignore[method-assign]

    # -- lifetime --------------------------------------------------------------------------------------
    @asynccontextmanager
    async def _lifespan(self, _server: Server[Any]) -> AsyncIterator[dict[str, Any]]:
        async with self.running():
            yield {}

    @asynccontextmanager
    async def running(self) -> AsyncIterator[Gateway]:
        """Serve at once; open the registry, ingest the manifest's catalogs and start every backend's
        owner task in the background; stop them all on exit."""
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._start)
                self.sources.start(tg)
                tg.start_soon(self.sessions.watch, self.notifier.tools_changed)  # other replicas' changes
                try:
                    yield self
                finally:
                    tg.cancel_scope.cancel()
        finally:
            self.calls.after_reply.run()  # calls answered but not learned from yet: before the last flush
            self.served.close()

    async def _start(self) -> None:
        """The background start (``server/turns/starting.py``): serving begins on the last committed
        registry."""
        from toolweave.server.turns.starting import start_in_background  # imports the registry's parts

        await start_in_background(self)

    async def _wait_ready(self, tool: str) -> types.CallToolResult | None:
        """Wait (bounded) for the background start; an error result if the registry is not usable."""
        if await self.served.wait():
            return None
        message = self.served.error or (
            f"the tool registry is still opening after {REGISTRY_WAIT_S:.0f} s; try again shortly"
        )
        return tool_error_result("unavailable", message, tool=tool)

    async def warm_up(self) -> None:
        """Leave a ready table beside a registry that has none, then load the request encoder (the
        ready table's, or fastembed's model where none runs without it) and the schema validator now
        rather than inside the first call."""
        from toolweave.server.turns.starting import leave_first_ready_table, request_encoder

        await leave_first_ready_table(self)
        try:
            embedder = self.served.registry.embedder
            encoder = await anyio.to_thread.run_sync(request_encoder, self.settings.home, embedder.model_id)
            if encoder is not None:
                embedder.use_request_encoder(encoder)
            await anyio.to_thread.run_sync(embedder.embed_query, "warm up")
            await anyio.to_thread.run_sync(argument_errors, {"type": "object"}, {})
        except Exception:  # retrieval will report the problem when it is actually needed
            log.warning("could not pre-load the embedding model", exc_info=True)

    # -- what is visible -------------------------------------------------------------------------------
    def published_tools(self, session: Session) -> list[types.Tool]:
        tools = meta_tools(self._tool_meta)
        if not self.served.is_ready():  # pinned tools follow with list_changed once the registry is open
            return tools + self._ready_tools(session)
        registry, guard = self.served.registry, self.served.guard
        excluded = self.sources.excluded_sources()
        for tool_id in session.published.ids():
            record = registry.find(tool_id)
            if record is None or record.source in excluded or not guard.allows(session.identity, record):
                continue
            tools.append(self._mcp_tool(record))
        return tools

    def _ready_tools(self, session: Session) -> list[types.Tool]:
        """While the registry opens: the session's tools that a ``find_tools`` answered from the ready
        table published (``server/turns/starting.py``), as that table has them."""
        if not self.ready_tools or not session.published.ids():
            return []
        published = set(session.published.ids())
        return [
            types.Tool.model_validate(
                {**listed_ready_tool(t.entry, False, t.listed), "_meta": self._tool_meta}
            )
            for t in self.ready_tools.tools
            if t.id in published
        ]

    def _mcp_tool(self, record: ToolRecord) -> types.Tool:
        # Keyed by id, so the cache never outgrows the registry. Registry records are immutable and
        # replaced on change, so "same object" means "same tool" (no hashing on every tools/list).
        cached = self._tool_cache.get(record.id)
        if cached is None or cached[0] is not record:
            tool = to_mcp_tool(record, self.names.name(record.id), self._tool_meta)
            cached = self._tool_cache[record.id] = (record, tool)
        return cached[1]

    def _input_schema(self, name: str) -> Mapping[str, Any] | None:
        if (schema := META_INPUT_SCHEMAS.get(name)) is not None:
            return schema
        record = self.calls.record_named(name) if self.served.is_ready() else None
        return record.input_schema if record else None

    # -- handlers --------------------------------------------------------------------------------------
    async def _list_tools(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        session = await self._session(ctx)
        # Never waits (instant start): tools that arrive later are announced with list_changed.
        if self.turns.has_pending_turn():
            await self.turns.apply_pending_turn(session)  # the host's turn came first: list its tools now
        tools = self.published_tools(session)
        # a find_tools answer held for this client's list is released once this reply was written
        self.notifier.list_built(session, ctx, session.published.ids() if self.served.is_ready() else ())
        # The list is per session and changes with find_tools: never let a client reuse it elsewhere.
        return types.ListToolsResult(tools=tools, ttl_ms=0, cache_scope="private")

    async def _listen(
        self, ctx: ServerRequestContext[Any, Any], params: types.SubscriptionsListenRequestParams
    ) -> types.SubscriptionsListenResult:
        await self._session(ctx)  # held here, so a change another replica makes reaches this stream
        return await self.notifier.listen(ctx, params)

    async def session_for(self, ctx: ServerRequestContext[Any, Any]) -> Session:
        """The session of the request ``ctx`` (created on its first request)."""
        return await self._session(ctx)

    async def _session(self, ctx: ServerRequestContext[Any, Any]) -> Session:
        identity = identity_of_request(ctx.request)
        session = await self.sessions.for_request(
            ctx, identity.name if identity else None, self.settings.security.default_identity
        )
        if self.relay is not None and identity is None:
            self.relay.learn(ctx, session)  # the stdio relay serves this client's calls like this request
        return session

    async def _call_tool(
        self, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        return await self.serve_call(lambda: self._session(ctx), params.name, params.arguments, ctx)

    async def serve_call(
        self,
        find_session: Callable[[], Awaitable[Session]],
        name: str,
        arguments: Mapping[str, Any] | None,
        ctx: ServerRequestContext[Any, Any] | None = None,
    ) -> types.CallToolResult:
        """One ``tools/call`` turn, as the SDK's handler and the stdio relay (``server/fronts/relay.py``)
        serve it: ``find_session`` resolves the caller's session, ``ctx`` (None on the relay, which serves no
        client that can be asked) the request whose client the upstream's requests are forwarded to."""
        started = time.perf_counter()
        session: Session | None = None
        arguments = arguments if arguments is not None else {}
        result: types.CallToolResult | None = None
        try:
            session = await find_session()
            if (not_ready := await self._wait_ready(name)) is not None:
                return not_ready
            back = back_channel(ctx)
            if name == FIND_TOOLS:
                result = await self._find_tools(session, arguments)
            elif name == CALL_TOOL:
                arguments, result = meta_arguments(CALL_TOOL, arguments)
                if result is None:
                    inner = arguments.get("arguments") or {}
                    result = await self.calls.call(session, arguments["name"], inner, back)
            else:
                result = await self.calls.call(session, name, arguments, back)
            return result
        except Exception as exc:  # last line of defence: an error result, never a dead request
            log.exception("tools/call %s failed inside the gateway", name)
            result = tool_error_result(
                "internal_error", f"the gateway failed on {name}: {type(exc).__name__}: {exc}", tool=name
            )
            return result
        finally:
            elapsed = time.perf_counter() - started
            observe_turn(self.metrics, self.audit, self._known, session, name, arguments, result, elapsed)
            self.calls.learn_after(ctx)  # what the call taught, once its reply is written

    def _known(self, tool: str) -> bool:
        # a registry still opening (or that did not open) knows no tool: no traceback per call
        return tool in (FIND_TOOLS, CALL_TOOL) or self.served.find(tool) is not None

    async def _find_tools(self, session: Session, arguments: Mapping[str, Any]) -> types.CallToolResult:
        with span("find_tools", identity=session.identity):
            if not plain_find_tools_arguments(arguments):
                arguments, bad = meta_arguments(FIND_TOOLS, arguments)
                if bad is not None:
                    return bad
            query = str(arguments["query"]).strip()
            if not query:
                return tool_error_result(
                    "invalid_arguments",
                    f"{FIND_TOOLS} needs a query with words in it, not only spaces",
                    tool=FIND_TOOLS,
                )
            # A huge query costs tokenising and BM25 time and says nothing more: only its head is searched
            # (the answer echoes the query's head with its real length).
            k = arguments.get("k")
            found, changed = await self.turns.find_tools(
                session, query[:MAX_QUERY_CHARS], None if k is None else min(int(k), MAX_K)
            )
            return find_tools_result(
                query,
                found,
                list_changed=changed,
                published=session.published.ids(),
                name_of=self.names.name,
                detail=arguments.get("detail") is True,
            )
