"""The gateway: one MCP server in front of many backends, publishing per session what the task needs.

``Gateway`` wires the SDK's low-level ``Server`` (handlers as constructor arguments) to the registry,
the backends, the sessions and the notifier. Its ``running()`` context owns every backend task: one
owner task per backend, started in a task group, cancelled on the way out. A backend's tool list goes
through the manifest's overrides into ``Registry.ingest`` (hash-based, in a worker thread), so tools
an upstream adds at run time are findable at once.

Instant start: given a registry *opener* instead of a registry, the gateway answers ``initialize`` and
``tools/list`` (meta-tools) at once and opens the registry in the background (LanceDB, numpy and the
embedder are imported there, not before the handshake). Only ``find_tools`` and calls wait, bounded,
for it; a registry that cannot be opened makes them return a clear error instead.

Nothing raised while serving a call escapes as a JSON-RPC error: see ``server/errors.py``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Callable, Collection, Hashable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types as types
from mcp.server import NotificationOptions, Server, ServerRequestContext
from mcp.shared.message import ServerMessageMetadata
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from toolweave.adapters.backend import Backend, Sampler
from toolweave.errors import RegistryError, ServerError
from toolweave.manifest import (
    Manifest,
    apply_tool_overrides,
    filter_removed_edges,
    graph_overrides,
    manifest_edges,
)
from toolweave.policy import Policy
from toolweave.records import DependencyEdge, ToolRecord
from toolweave.retrieval.pipeline import retrieve_tools
from toolweave.server.audit import AuditLog
from toolweave.server.auth import identity_of_request
from toolweave.server.errors import to_tool_error_result
from toolweave.server.find_cache import FindCache
from toolweave.server.guard import Guard
from toolweave.server.handshake import INSTRUCTIONS, SERVER_NAME, server_version
from toolweave.server.meta_tools import (
    ALWAYS_LOAD,
    CALL_TOOL,
    FIND_TOOLS,
    MAX_K,
    META_INPUT_SCHEMAS,
    FoundTool,
    find_tools_result,
    meta_tools,
    to_mcp_tool,
)
from toolweave.server.metrics import GatewayMetrics
from toolweave.server.names import NameMap
from toolweave.server.notify import Notifier
from toolweave.server.proxy import Proxy, argument_errors
from toolweave.server.sessions import Session, SessionStore
from toolweave.settings import RetrievalSettings, Settings
from toolweave.tracing import span

if TYPE_CHECKING:  # the registry (LanceDB, numpy, networkx) is imported in the background start
    from toolweave.registry import Registry
    from toolweave.retrieval.results import RankedTool

__all__ = ["Gateway"]

log = logging.getLogger(__name__)

AVAILABILITY_POLL_S = 0.25
"""How often backend availability is sampled; a flip re-publishes (tools appear/disappear)."""

STARTUP_GRACE_S = 15.0
"""Once the registry is open, ``find_tools`` and calls wait (at most this long, and at most the connect
timeout) for upstreams whose first tool list is not in the registry yet, so a client's first request is
not answered from a half-connected gateway. Upstreams whose attempt already failed are not waited for.
``tools/list`` never waits: it answers with what is there and ``list_changed`` follows."""

REGISTRY_WAIT_S = 30.0
"""How long ``find_tools`` and calls wait for the registry the gateway opens in the background
(10,000 tools open in a few seconds on a busy 2-core machine); after that they answer ``unavailable``."""

SESSION_WAIT_S = 5.0
"""How long a host's turn waits for the first client session of a gateway that has none yet."""

MAX_QUERY_CHARS = 4000
"""Longer find_tools queries are cut to this many characters before retrieval."""

RELIST_SETTLE_S = 0.005
"""After the client's re-list was answered, a held find_tools result waits this much longer: the list
response is written after its handler returns, and over HTTP it travels on another connection."""

TOPIC_SHIFT_BELOW = 0.08
"""A turn whose embedding is on average less similar than this to the context turns starts a new topic:
they stop being retrieval context. With the default MiniLM, unrelated requests score about -0.05-0.05
and follow-ups 0.09-0.3 ("find flights to Rome" / "what's the weather there": 0.094)."""


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
        # An opener is called in the background start (and the registry closed on the way out).
        self._open_registry = registry if callable(registry) else None
        self._registry: Registry | None = None if callable(registry) else registry
        self._start_error: str | None = None
        self._reported: set[str] = set()  # backends whose tool list was ingested at least once
        self.settings = settings
        self.manifest = manifest
        self.backends: dict[str, Backend] = {b.name: b for b in backends}
        self._pending_turn: _PendingTurn | None = None
        self.sessions = SessionStore.from_settings(settings)
        self.notifier = Notifier()
        self.names = NameMap(settings.publish.name_budget, lambda: (t.id for t in self.registry.tools()))
        self.proxy = Proxy(
            self.backends, timeout_s=settings.call_timeout_s, max_result_chars=settings.max_result_chars
        )
        self._catalog_sources = {c.source for c in manifest.catalogs} if manifest else set()
        self._manifest_edges: list[DependencyEdge] = manifest_edges(manifest) if manifest else []
        self._available: dict[str, bool] = {name: False for name in self.backends}
        self._ever_available: set[str] = set()
        self._stale_sources: set[str] = set()
        self._started_at = time.monotonic()
        self._tasks: anyio.abc.TaskGroup | None = None  # running()'s: backends added later start there
        self._tool_cache: dict[str, tuple[ToolRecord, types.Tool]] = {}
        # Claude Code 2.1 otherwise shows the model only the names of MCP tools, behind its own
        # ToolSearch: neither find_tools nor a tool just published would be callable next step.
        self._tool_meta = dict(ALWAYS_LOAD) if settings.publish.always_load else None
        # security (server/auth.py, guard.py, audit.py, metrics.py)
        security = settings.security
        self._policy = manifest.access_policy if manifest else Policy()
        self.guard: Guard  # set with the registry (_attach_registry): its quarantine lives beside it
        self.metrics = GatewayMetrics()
        self.find_cache: FindCache[list[Any]] = FindCache(security.find_cache_size)
        self._searching = 0  # find_tools searches computing now (on the event loop: no lock needed)
        if self._registry is not None:
            self._attach_registry(self._registry)
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
        self.ready = anyio.Event()
        """Set once the background start is over: registry open, catalogs ingested (or it failed)."""
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
                self._tasks = tg
                tg.start_soon(self._start)
                # Upstreams connect while the registry opens; their first tool lists wait for it.
                for backend in self.backends.values():
                    tg.start_soon(self._run_backend, backend)
                tg.start_soon(self._watch_availability)
                tg.start_soon(self.sessions.watch, self.notifier.tools_changed)  # other replicas' changes
                try:
                    yield self
                finally:
                    tg.cancel_scope.cancel()
        finally:
            if self._open_registry is not None and self._registry is not None:
                self._registry.close()

    @property
    def registry(self) -> Registry:
        """The open registry; ``RegistryError`` while it is still opening or could not be opened."""
        if self._registry is None:
            raise RegistryError(self._start_error or "the tool registry is still opening")
        return self._registry

    def is_ready(self) -> bool:
        """Whether the registry is open with the manifest's catalogs in it (false if that failed)."""
        return self.ready.is_set() and self._start_error is None

    async def _start(self) -> None:
        """The background start. Any failure is logged and answered by every later find_tools/call."""
        started = time.perf_counter()
        stage = "the tool registry could not be opened"
        from toolweave.server import replica  # builds backends: not before the handshake

        try:
            if self._open_registry is not None:
                # abandon_on_cancel: a client that leaves during the start must not wait for it
                opened = await anyio.to_thread.run_sync(self._open_registry, abandon_on_cancel=True)
                self._attach_registry(opened)
            stage = "the manifest's catalogs could not be ingested"
            await self._ingest_catalogs()
            stage = "the manifest's dependency overrides could not be applied"
            if self.manifest is not None:
                # add / remove / pin, also over edges saved by earlier runs; kept for every later ingest
                await anyio.to_thread.run_sync(self.registry.set_overrides, graph_overrides(self.manifest))
                await anyio.to_thread.run_sync(self.registry.set_private, self.manifest.private)
            stage = "the manifest's sources could not be shared with other replicas"
            await replica.share_sources(self)
            self.refresh_stale_sources()
            self._warn_if_empty()
        except Exception as exc:  # any start failure is reported, never fatal
            self._start_error = f"{stage}: {type(exc).__name__}: {exc}"
            log.error("%s; find_tools and calls will answer with this error", self._start_error)
            log.debug("background start failed", exc_info=True)
            self.ready.set()
            return
        self.ready.set()
        # Upstreams could not report before now: their startup grace starts with the registry.
        self._started_at = time.monotonic()
        log.info(
            "gateway ready in %.2f s: %d tools in registry, %d backends",
            time.perf_counter() - started,
            len(self.registry),
            len(self.backends),
        )
        await self._registry_opened()
        async with anyio.create_task_group() as tg:
            tg.start_soon(self.guard.watch, self._quarantine_changed)
            tg.start_soon(replica.follow_registry, self)  # commits of other replicas on this registry
            await self._warm_up()
            self.warmed.set()

    async def _registry_opened(self) -> None:
        """Sessions that listed before the registry was open lacked their pinned tools: tell them."""
        for session in self.sessions:
            if any(
                self._source_of(tool_id) not in (None, *self.excluded_sources())
                for tool_id in session.published.ids()
            ):
                await self.notifier.tools_changed(session)

    async def _wait_ready(self, tool: str) -> types.CallToolResult | None:
        """Wait (bounded) for the background start; an error result if the registry is not usable."""
        if not self.ready.is_set():
            with anyio.move_on_after(REGISTRY_WAIT_S):
                await self.ready.wait()
        if self.is_ready():
            return None
        message = self._start_error or (
            f"the tool registry is still opening after {REGISTRY_WAIT_S:.0f} s; try again shortly"
        )
        return to_tool_error_result("unavailable", message, tool=tool)

    def _warn_if_empty(self) -> None:
        if self.manifest is not None and not self.backends and not self._catalog_sources:
            log.warning(
                "the manifest defines no upstreams (servers, openapi) and no catalogs: only tools already "
                "in the registry at %s can be found, and none can be called",
                self.settings.home,
            )

    async def _warm_up(self) -> None:
        """Load the embedding model and the schema validator now rather than inside the first call."""
        try:
            await anyio.to_thread.run_sync(self.registry.embedder.embed_query, "warm up")
            await anyio.to_thread.run_sync(argument_errors, {"type": "object"}, {})
        except Exception:  # retrieval will report the problem when it is actually needed
            log.warning("could not pre-load the embedding model", exc_info=True)

    async def _ingest_catalogs(self) -> None:
        if self.manifest is None or not self.manifest.catalogs:
            return
        from toolweave.registry.catalog import load_catalog  # only manifests with catalogs pay for it

        for entry in self.manifest.catalogs:
            catalog = await anyio.to_thread.run_sync(
                partial(
                    load_catalog, [entry.path], entry.source, require_description=entry.require_description
                )
            )
            tools = apply_tool_overrides(self.manifest, catalog.tools)
            edges = filter_removed_edges(self.manifest, catalog.edges)
            await anyio.to_thread.run_sync(self.guard.review, entry.source, tools)
            summary = await anyio.to_thread.run_sync(
                partial(self.registry.ingest, entry.source, tools, edges)
            )
            log.info("catalog %s: %s", entry.source, summary)
        await self._apply_manifest_edges()

    async def _run_backend(self, backend: Backend) -> None:
        try:
            await backend.run(partial(self._on_tools, backend.name))
        except anyio.get_cancelled_exc_class():
            raise
        except Exception:  # contract: run() never raises; if one does, the others keep serving
            log.exception("backend %s stopped with an error; its tools stay unavailable", backend.name)

    async def _on_tools(
        self, expected: str, source: str, tools: Sequence[ToolRecord], edges: Sequence[DependencyEdge]
    ) -> None:
        """A backend's complete, current tool list: ingest it and re-publish what changed."""
        await self.ready.wait()  # upstreams connect while the registry is still opening
        if self._start_error is not None:
            self._reported.add(expected)  # nothing to wait for: calls answer the start error
            return
        try:
            if source != expected:
                log.warning("backend %s reported tools as source %r; using %r", expected, source, expected)
                source = expected
            if self.manifest is not None:
                tools = apply_tool_overrides(self.manifest, tools)
                edges = filter_removed_edges(self.manifest, edges)
            before = {t.id: t.content_hash for t in self.registry.tools(source)}
            held = await anyio.to_thread.run_sync(self.guard.review, source, list(tools))
            self._quarantine_changed()
            generation = self.registry.loaded_generation
            summary = await anyio.to_thread.run_sync(
                partial(self.registry.ingest, source, list(tools), list(edges))
            )
            if self.registry.loaded_generation != generation:
                # not for an upstream re-listing what the registry holds: every replica's upstreams do,
                # and clearing would send every cached answer back to the model
                self.find_cache.clear()
            await self._apply_manifest_edges()
            self.refresh_stale_sources()
            log.info("%s: %d tools (%s)", source, len(tools), summary)
            after = {t.id: t.content_hash for t in tools}
            removed = (set(before) - set(after)) | held  # quarantined tools leave every published set
            changed = {i for i, h in after.items() if before.get(i) not in (None, h)}
            added = set(after) - set(before)
            await self._republish(source, removed=removed, changed=changed, added=added)
        except Exception:  # a bad tool list must not kill the backend's owner task
            log.exception("could not ingest the tools of %s", source)
        finally:
            self._reported.add(expected)

    async def _apply_manifest_edges(self) -> None:
        """Add manifest edges whose two ends exist and which the graph lacks: a backend may connect long
        after startup, and a tool that disappears and comes back loses its edges with it."""
        if not self._manifest_edges:
            return
        present = {e.key for e in self.registry.edges()}
        ready = [
            e
            for e in self._manifest_edges
            if e.key not in present and self.registry.find(e.tool) and self.registry.find(e.depends_on)
        ]
        if not ready:
            return
        try:
            await anyio.to_thread.run_sync(self.registry.add_edges, ready)
            self.find_cache.clear()
        except Exception:  # manifest edges are optional: never fatal
            log.exception("could not add manifest dependency edges")

    async def _republish(self, source: str, *, removed: set[str], changed: set[str], added: set[str]) -> None:
        pinned = set(self.settings.publish.pinned)
        for session in self.sessions:
            ids = set(session.published.ids())
            dropped = session.published.discard(removed & ids)
            if dropped.changed:
                await self.sessions.commit(session)
            if dropped.changed or (changed & ids) or (added & pinned):
                await self.notifier.tools_changed(session)

    # -- replicas (server/replica.py) ------------------------------------------------------------------
    def add_backend(self, backend: Backend) -> None:
        """Serve a source another replica shared: its owner task starts beside the others."""
        if self._tasks is None or backend.name in self.backends:
            return
        self.backends[backend.name] = backend  # the proxy reads this same mapping
        self._available[backend.name] = False
        self._tasks.start_soon(self._run_backend, backend)

    def add_shared_catalogs(self, sources: set[str]) -> None:
        """Catalog sources another replica ingested: their tools are served here too."""
        self._catalog_sources |= sources

    async def republish(self, *, removed: set[str], changed: set[str], added: set[str]) -> None:
        """Tell sessions whose published set another replica's commit changed."""
        await self._republish("", removed=removed, changed=changed, added=added)

    async def _watch_availability(self) -> None:
        # Polling backs up ``backend_status``: a Backend is not obliged to report its status.
        while True:
            for name in list(self.backends):  # a replica may add a shared source meanwhile
                await self.backend_status(name)
            await anyio.sleep(AVAILABILITY_POLL_S)

    async def backend_status(self, name: str, _available: bool | None = None) -> None:
        """Re-publish when backend ``name`` went up or down (also usable as the adapters' ``on_status``)."""
        backend = self.backends.get(name)
        if backend is None:
            return
        now = bool(backend.available)
        self.metrics.upstream_up.labels(name).set(1 if now else 0)
        if now:
            self._ever_available.add(name)
        if now != self._available[name]:
            self._available[name] = now
            log.info("upstream %s is %s", name, "available" if now else "unavailable")
            await self._availability_changed(name)

    async def _first_connections(self, sources: set[str] | None = None) -> None:
        """Wait out the startup grace for upstreams still on their first connection attempt, until
        their first tool list is in the registry (connected is not enough: it may still be ingesting)."""
        deadline = self._started_at + min(STARTUP_GRACE_S, self.settings.connect_timeout_s)
        while time.monotonic() < deadline:
            pending = [
                name
                for name, backend in self.backends.items()
                if (sources is None or name in sources)
                and name not in self._reported
                # MCPBackend sets last_error after a failed attempt: no point waiting for it then
                and getattr(backend, "last_error", None) is None
            ]
            if not pending:
                return
            await anyio.sleep(0.05)

    async def _availability_changed(self, source: str) -> None:
        for session in self.sessions:
            if any(self._source_of(t) == source for t in session.published.ids()):
                await self.notifier.tools_changed(session)

    # -- what is visible -------------------------------------------------------------------------------
    def _source_of(self, tool_id: str) -> str | None:
        if self._registry is None:
            return None
        record = self._registry.find(tool_id)
        return record.source if record else None

    def excluded_sources(self) -> set[str]:
        """Sources not to publish or retrieve: disconnected backends, and registry sources this
        manifest does not define (left over from another run)."""
        excluded = {name for name, b in self.backends.items() if not b.available}
        return excluded | self._stale_sources if self._stale_sources else excluded

    def refresh_stale_sources(self) -> None:
        """Recompute which registry sources no backend or catalog serves (also after another replica's
        commit). Computed after each ingest, not per request: listing sources walks every tool (10k+)."""
        if self.manifest is None:
            return
        known = set(self.backends) | self._catalog_sources
        self._stale_sources = {s for s in self.registry.sources() if s not in known}

    def _attach_registry(self, registry: Registry) -> None:
        """The registry is open: its guard (quarantine beside it) and the query batcher come with it."""
        self.guard = Guard(registry, self.settings.security, self._policy)
        # throughput: concurrent turns share model runs; repeated questions are answered from a cache
        from toolweave.registry.batching import QueryBatcher  # numpy: after the handshake

        if not isinstance(registry.embedder, QueryBatcher):
            # QueryBatcher is a drop-in Embedder (its other calls pass through __getattr__)
            registry.embedder = QueryBatcher(registry.embedder)  # type: ignore[assignment]
        self.metrics.quarantined.set(len(self.guard.held))
        self._registry = registry

    def _quarantine_changed(self) -> None:
        self.metrics.quarantined.set(len(self.guard.held))

    def published_tools(self, session: Session) -> list[types.Tool]:
        tools = meta_tools(self._tool_meta)
        if not self.is_ready():  # pinned tools follow with list_changed once the registry is open
            return tools
        excluded = self.excluded_sources()
        for tool_id in session.published.ids():
            record = self.registry.find(tool_id)
            if record is None or record.source in excluded or not self.guard.allows(session.identity, record):
                continue
            tools.append(self._mcp_tool(record))
        return tools

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
        record = self._record_named(name) if self.is_ready() else None
        return record.input_schema if record else None

    def _record_named(self, name: str) -> ToolRecord | None:
        """The tool a client means by ``name``: its published name or its full id."""
        record = self.registry.find(name)
        if record is None and (tool_id := self.names.tool_id(name)) is not None:
            record = self.registry.find(tool_id)
        return record

    # -- handlers --------------------------------------------------------------------------------------
    async def _list_tools(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        session = await self._session(ctx)
        # Never waits (instant start): tools that arrive later are announced with list_changed.
        if self._pending_turn is not None and self.is_ready():
            await self._apply_pending_turn(session)  # the host's turn came first: list its tools now
        tools = self.published_tools(session)
        session.listed()  # releases a find_tools result held until this client has the new list
        # The list is per session and changes with find_tools: never let a client reuse it elsewhere.
        return types.ListToolsResult(tools=tools, ttl_ms=0, cache_scope="private")

    async def _listen(
        self, ctx: ServerRequestContext[Any, Any], params: types.SubscriptionsListenRequestParams
    ) -> types.SubscriptionsListenResult:
        await self._session(ctx)  # held here, so a change another replica makes reaches this stream
        return await self.notifier.listen(ctx, params)

    async def _session(self, ctx: ServerRequestContext[Any, Any]) -> Session:
        identity = identity_of_request(ctx.request)
        return await self.sessions.for_request(
            ctx, identity.name if identity else None, self.settings.security.default_identity
        )

    async def _call_tool(
        self, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        started = time.perf_counter()
        session: Session | None = None
        arguments = params.arguments if params.arguments is not None else {}
        result: types.CallToolResult | None = None
        try:
            session = await self._session(ctx)
            if (not_ready := await self._wait_ready(params.name)) is not None:
                return not_ready
            if params.name == FIND_TOOLS:
                result = await self._find_tools(session, arguments)
            elif params.name == CALL_TOOL:
                problems = argument_errors(self._input_schema(CALL_TOOL) or {}, arguments)
                if problems:
                    result = _bad_meta_arguments(CALL_TOOL, problems)
                else:
                    inner = arguments.get("arguments") or {}
                    result = await self._proxy(ctx, session, arguments["name"], inner)
            else:
                result = await self._proxy(ctx, session, params.name, arguments)
            return result
        except Exception as exc:  # last line of defence: an error result, never a dead request
            log.exception("tools/call %s failed inside the gateway", params.name)
            result = to_tool_error_result(
                "internal_error",
                f"the gateway failed on {params.name}: {type(exc).__name__}: {exc}",
                tool=params.name,
            )
            return result
        finally:
            self._observe(session, params.name, arguments, result, time.perf_counter() - started)

    def _observe(
        self,
        session: Session | None,
        name: str,
        arguments: Mapping[str, Any],
        result: types.CallToolResult | None,
        elapsed: float,
    ) -> None:
        """Metrics and audit line of one turn (never raises: observing must not break serving)."""
        try:
            kind = "find_tools" if name == FIND_TOOLS else "call"
            tool, args = name, arguments
            if name == CALL_TOOL and isinstance(arguments.get("name"), str):
                tool, inner = arguments["name"], arguments.get("arguments")
                args = inner if isinstance(inner, Mapping) else {}
            outcome = "cancelled" if result is None else _outcome(result)
            known = tool in (FIND_TOOLS, CALL_TOOL) or self.registry.find(tool) is not None
            self.metrics.turn_latency.labels(kind).observe(elapsed)
            self.metrics.calls.labels(tool if known else "(unknown)", outcome).inc()
            if kind == "find_tools" and session is not None:
                self.metrics.published_size.observe(len(session.published))
            if self.audit is not None:
                if kind == "find_tools":
                    args = {k: (str(v)[:80] if k == "query" else v) for k, v in arguments.items()}
                self.audit.record(
                    kind=kind,
                    identity=session.identity if session else "?",
                    session=session.key if session else "?",
                    tool=tool[:128],
                    outcome=outcome,
                    latency_s=elapsed,
                    arguments=args,
                )
        except Exception:  # bookkeeping must never fail the call
            log.exception("could not record metrics/audit for %s", name)

    async def _find_tools(self, session: Session, arguments: Mapping[str, Any]) -> types.CallToolResult:
        with span("find_tools", identity=session.identity):
            return await self._find_tools_traced(session, arguments)

    async def _find_tools_traced(
        self, session: Session, arguments: Mapping[str, Any]
    ) -> types.CallToolResult:
        if not _plain_find_tools_arguments(arguments):
            problems = argument_errors(self._input_schema(FIND_TOOLS) or {}, arguments)
            if problems:
                return _bad_meta_arguments(FIND_TOOLS, problems)
        query = str(arguments["query"]).strip()
        if not query:
            return to_tool_error_result(
                "invalid_arguments",
                f"{FIND_TOOLS} needs a query with words in it, not only spaces",
                tool=FIND_TOOLS,
            )
        # A huge query costs tokenising and BM25 time and says nothing more: only its head is searched.
        query = query[:MAX_QUERY_CHARS]
        await self._first_connections()
        params = self.settings.retrieval
        k = arguments.get("k")
        if k is not None:
            k = min(int(k), MAX_K)
            params = params.model_copy(update={"final_k": k, "top_k": min(params.top_k, k)})
        found, changed = await self._retrieve_turn(session, query, params)
        return find_tools_result(
            query,
            found,
            list_changed=changed,
            published=session.published.ids(),
            name_of=self.names.name,
            detail=arguments.get("detail") is True,
            listed=session.listed_notices == session.notices,  # its list has the published tools
        )

    async def hear_turn(
        self, text: str, session_key: str | None = None, *, first_session: bool = False
    ) -> dict[str, Any]:
        """A host reports the user's turn: retrieve on the conversation, publish and notify each chosen
        session before the model's first request, and return once each has re-listed (bounded by
        ``publish.relist_wait_ms``). ``session_key`` picks one: an ``Mcp-Session-Id``, the
        ``_meta["io.toolweave/session"]`` value a 2026-era client sends, or a gateway session key;
        without it, every session (a stdio gateway has exactly one). ``first_session``: with no session
        yet, the turn is for the first one to come (only for the host that spawned this stdio gateway:
        on HTTP that could be anybody's)."""
        text = text.strip()[:MAX_QUERY_CHARS]
        if not text:
            raise ServerError("the turn text is empty")
        if not self.ready.is_set():
            with anyio.move_on_after(REGISTRY_WAIT_S):
                await self.ready.wait()
        if not self.is_ready():
            raise ServerError(self._start_error or "the tool registry is still opening; try again shortly")
        await self._first_connections()
        sessions = [s for s in self.sessions if session_key is None or _is_session(s, session_key)]
        if not sessions and session_key is None and first_session:
            return await self._turn_for_first_session(text)
        report: dict[str, Any] = {"sessions": []}
        for session in sessions:
            found, changed = await self._retrieve_turn(session, text, self.settings.retrieval)
            report["sessions"].append(
                {
                    "session": session.key,
                    "tool_list_changed": changed,
                    "found": [self.names.name(f.record.id) for f in found],
                }
            )
        return report

    async def _turn_for_first_session(self, text: str) -> dict[str, Any]:
        """A host ran its prompt hook while it still connects to this (stdio) gateway: the turn is for
        the session about to start. Its first ``tools/list`` applies the turn before it is answered, so
        that first list already carries the tools (a notice now could reach nobody)."""
        pending = _PendingTurn(text)
        self._pending_turn = pending
        with anyio.move_on_after(SESSION_WAIT_S):
            await pending.done.wait()
        if self._pending_turn is pending:
            self._pending_turn = None
        return {"sessions": pending.sessions}

    async def _apply_pending_turn(self, session: Session) -> None:
        pending, self._pending_turn = self._pending_turn, None
        if pending is None:
            return
        found, changed = await self._retrieve_turn(
            session, pending.text, self.settings.retrieval, announce=False
        )
        pending.sessions.append(
            {
                "session": session.key,
                "tool_list_changed": changed,
                "found": [self.names.name(f.record.id) for f in found],
            }
        )
        pending.done.set()

    async def _retrieve_turn(
        self, session: Session, text: str, params: RetrievalSettings, *, announce: bool = True
    ) -> tuple[list[FoundTool], bool]:
        """One turn of the conversation: retrieve with its context, publish, notify, hold until re-listed."""
        # The same text again must give the same answer, so it is never its own context.
        context = [q for q in session.context() if q != text]
        if context and await self._topic_shifted(context, text):
            session.start_topic()
            context = []
        wanted = params.final_k
        exclude = self.excluded_sources()
        if self.guard.hides_any(session.identity):
            # Hidden tools are cut after ranking: ask for more so the answer keeps its length.
            exclude = exclude | self.guard.denied_sources(session.identity, self.registry.sources())
            params = params.model_copy(update={"final_k": min(wanted * 2 + 10, 500)})

        def key_of(params: RetrievalSettings) -> Hashable:
            return (text, tuple(context), params.model_dump_json(), frozenset(exclude))

        if self._sheds_decomposition(params) and not self.find_cache.holds(key_of(params)):
            params = params.model_copy(update={"decompose": "off"})  # cached under its own key
        ranked = await self.find_cache.get(
            key_of(params), partial(self._search, text, params, exclude, context)
        )
        found = [
            FoundTool(rec, r)
            for r in ranked
            if (rec := self.registry.find(r.tool_id)) is not None and self.guard.allows(session.identity, rec)
        ][:wanted]
        turn = session.next_turn()
        # below the relevance floor: listed in the answer (callable via call_tool), not published
        change = session.published.select([f.record.id for f in found if f.ranked.publish], turn)
        session.add_turn(text)
        await self.sessions.commit(session)  # before the notice: the re-list may reach another replica
        if change.changed:
            log.info("%s: +%s -%s", session.key, list(change.added), list(change.evicted))
            if announce:
                await self._notify_and_hold(session)
        return found, change.changed

    def _sheds_decomposition(self, params: RetrievalSettings) -> bool:
        """Whether a search now skips query decomposition: so many are computing that CPU is the queue
        (``Settings.shed_decomposition_at``; one client's turns never get there)."""
        limit = self.settings.shed_decomposition_at
        return params.decompose != "off" and limit > 0 and self._searching >= limit

    async def _search(
        self, text: str, params: RetrievalSettings, exclude: Collection[str], context: Sequence[str]
    ) -> list[RankedTool]:
        self._searching += 1
        try:
            return await anyio.to_thread.run_sync(partial(self._retrieve, text, params, exclude, context))
        finally:
            self._searching -= 1

    def _retrieve(
        self, text: str, params: RetrievalSettings, exclude: Collection[str], context: Sequence[str]
    ) -> list[RankedTool]:
        """Retrieval over the registry (in a worker thread). The retrieve span holds the registry's search
        span; what is left of it is fusion, floor and the walk (retrieval itself imports no tracing)."""
        with span("retrieve", method=params.method, top_k=params.top_k, final_k=params.final_k):
            return retrieve_tools(self.registry, text, params, exclude_sources=exclude, context=context)

    async def _topic_shifted(self, context: list[str], text: str) -> bool:
        """Whether ``text`` is unrelated to the conversation so far (its mean similarity to the context
        turns is below ``TOPIC_SHIFT_BELOW``). The mean, not the latest turn alone: a short follow-up
        ("and in Paris?") resembles little by itself, and one stray turn must not carry a topic along."""
        texts = [*context, text]
        # Usually every text was embedded before (the context by earlier turns, a repeated question by
        # earlier sessions): then no worker-thread hop, which costs more than the arithmetic.
        embedder = self.registry.embedder
        vectors = embedder.cached_queries(texts)
        if vectors is None:
            try:
                vectors = await anyio.to_thread.run_sync(embedder.embed_queries, texts)
            except Exception:  # retrieval itself reports embedder problems; keep the context meanwhile
                return False
        *earlier, latest = vectors
        return sum(float(v @ latest) for v in earlier) / len(earlier) < TOPIC_SHIFT_BELOW  # unit vectors

    async def _notify_and_hold(self, session: Session) -> None:
        """Notify ``session`` and wait (bounded) until it fetched the new list, so that the answer to
        the request that changed the set reaches a client that already lists the new tools. No wait
        for a client that cannot hear the notice, or that did not re-list after an earlier one."""
        await self.notifier.tools_changed(session)
        wait_s = self.settings.publish.relist_wait_ms / 1000
        if wait_s <= 0 or not session.relists_on_notice or not self.notifier.can_reach(session):
            return
        if await session.wait_relisted(wait_s):
            await anyio.sleep(RELIST_SETTLE_S)
        else:
            log.info("%s did not re-list within %.0f ms of list_changed", session.key, wait_s * 1000)

    async def _proxy(
        self, ctx: ServerRequestContext[Any, Any], session: Session, name: str, arguments: Any
    ) -> types.CallToolResult:
        with span("call", tool=name[:128], identity=session.identity) as current:
            result = await self._proxy_traced(ctx, session, name, arguments)
            if current is not None:
                current.set_attribute("toolweave.outcome", _outcome(result))
            return result

    async def _proxy_traced(
        self, ctx: ServerRequestContext[Any, Any], session: Session, name: str, arguments: Any
    ) -> types.CallToolResult:
        record = self._record_named(name)
        if record is None:
            # A client may know the name from an earlier session while its upstream is still connecting.
            await self._first_connections()
            record = self._record_named(name)
        if record is None or not self.guard.allows(session.identity, record):
            # Hidden by policy or quarantine: answered exactly like a missing tool (reveals nothing).
            return to_tool_error_result(
                "unknown_tool",
                f"no tool named {name!r}; use {FIND_TOOLS} to search for the tool you need",
                tool=name,
            )
        if record.source in self._stale_sources:
            return to_tool_error_result(
                "unknown_tool",
                f"{name!r} belongs to {record.source!r}, which this gateway does not serve",
                tool=name,
            )
        if record.source in self.backends and record.source not in self._ever_available:
            await self._first_connections({record.source})
        turn = session.next_turn()
        session.published.touch(record.id, turn)
        # Arguments are neither kept nor logged: they may hold secrets.
        result = await self.proxy.call(record, arguments, sampler=_sampler_for(ctx))
        await self.sessions.commit(session)
        if not result.is_error:
            if session.queries:  # Tool2Vec: the conversation's latest request led to this tool
                await anyio.to_thread.run_sync(self.registry.record_usage, record.id, session.queries[-1])
            await self._suggest_next_steps(session, record, turn)
        return result

    async def _suggest_next_steps(self, session: Session, record: ToolRecord, turn: int) -> None:
        """Publish the tools that consume what ``record`` produced (its dependents in the graph), into
        the set's free room and at most ``final_k`` of them."""
        params = self.settings.retrieval
        excluded = self.excluded_sources()
        dependents = [
            tool_id
            for tool_id in self.registry.dependents(record.id, params.edge_kinds)
            if (dep := self.registry.find(tool_id)) is not None
            and dep.source not in excluded
            and self.guard.allows(session.identity, dep)
        ]
        change = session.published.suggest(dependents[: params.final_k], turn)
        if change.changed:
            await self.sessions.commit(session)
            log.info("%s: next steps after %s: +%s", session.key, record.id, list(change.added))
            await self._notify_and_hold(session)


@dataclass
class _PendingTurn:
    """A host's turn waiting for the gateway's first client session."""

    text: str
    done: anyio.Event = field(default_factory=anyio.Event)
    sessions: list[dict[str, Any]] = field(default_factory=list)


def _is_session(session: Session, ref: str) -> bool:
    connection_id = getattr(session.connection, "session_id", None)
    return ref in (session.key, connection_id) or session.key == f"client-{ref}"


def _outcome(result: types.CallToolResult) -> str:
    if not result.is_error:
        return "ok"
    error = (result.structured_content or {}).get("error")
    code = error.get("code") if isinstance(error, dict) else None
    return code if isinstance(code, str) else "tool_error"


def _plain_find_tools_arguments(arguments: Mapping[str, Any]) -> bool:
    """Whether ``arguments`` are the usual well-formed ``find_tools`` call: a non-empty string query and
    at most an integer ``k`` in range. Those pass the schema check, whose validator costs the event loop
    more than the rest of a cached answer; anything else still gets it (and its exact messages)."""
    query, k = arguments.get("query"), arguments.get("k", 1)
    return (
        len(arguments) <= 2
        and arguments.keys() <= {"query", "k"}
        and type(query) is str
        and query != ""
        and type(k) is int
        and 1 <= k <= MAX_K
    )


def _bad_meta_arguments(tool: str, problems: list[dict[str, str]]) -> types.CallToolResult:
    listed = "; ".join(f"{p['field']}: {p['problem']}" for p in problems)
    return to_tool_error_result(
        "invalid_arguments",
        f"arguments for {tool} are invalid: {listed}",
        tool=tool,
        details={"errors": problems},
    )


def _sampler_for(ctx: ServerRequestContext[Any, Any]) -> Sampler | None:
    """Forward upstream sampling to this client, when it is a handshake-era client that declared sampling.

    2026-era clients cannot receive server requests (sampling travels as ``InputRequiredResult``
    there, which the Backend protocol does not carry), so their upstreams see no sampler.
    """
    if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
        return None
    session = ctx.session
    caps = session.client_capabilities
    if caps is None or caps.sampling is None:
        return None

    async def sample(params: types.CreateMessageRequestParams) -> types.CreateMessageResult | types.ErrorData:
        # The upstream's request as it is, minus its `_meta` (meant for the upstream's own link) and tool
        # use (the client's sampling.tools capability is not checked here).
        forwarded = params.model_copy(update={"meta": None, "tools": None, "tool_choice": None})
        try:
            result = await session.send_request(
                types.CreateMessageRequest(params=forwarded),
                types.CreateMessageResult,
                metadata=ServerMessageMetadata(related_request_id=ctx.request_id),
            )
        except Exception as exc:  # the client refused or failed: tell the upstream, keep going
            return types.ErrorData(code=types.INTERNAL_ERROR, message=f"client sampling failed: {exc}")
        return result

    return sample
