"""Source synchronisation: what the gateway's backends and catalogs hold, kept in the registry.

``SourceSync`` owns the backends (one owner task each, run in the gateway's task group) and what is
known about them: which are available now, which reported their first tool list, which registry
sources no backend or catalog of this manifest serves (stale: left over from another run). A backend's
tool list goes through the manifest's overrides into ``Registry.ingest`` (hash-based, in a worker
thread), so tools an upstream adds at run time are findable at once; sessions whose published tools
changed hear ``list_changed``. Other replicas reach this gateway through the same methods
(``server/sessions/replica.py``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

import anyio

from toolweave.adapters.backend import Backend
from toolweave.manifest import Manifest, apply_tool_overrides, graph_overrides
from toolweave.records import DependencyEdge, ToolRecord
from toolweave.server.calls.metrics import GatewayMetrics
from toolweave.server.fronts.shutdown import STOPPING
from toolweave.server.served import Served
from toolweave.server.sessions.session_book import SessionStore
from toolweave.server.turns.find_cache import FindCache
from toolweave.server.turns.notify import Notifier
from toolweave.settings import Settings

if TYPE_CHECKING:  # the registry (LanceDB, numpy, networkx) is imported in the background start
    from toolweave.registry import Registry

__all__ = ["SourceSync"]

log = logging.getLogger(__name__)

AVAILABILITY_POLL_S = 0.25
"""How often backend availability is sampled; a flip re-publishes (tools appear/disappear)."""

STARTUP_GRACE_S = 15.0
"""Once the registry is open, ``find_tools`` and calls wait (at most this long, and at most the connect
timeout) for upstreams whose first tool list is not in the registry yet, so a client's first request is
not answered from a half-connected gateway. Upstreams whose attempt already failed are not waited for.
``tools/list`` never waits: it answers with what is there and ``list_changed`` follows."""

FIRST_LIST_POLL_S = 0.05
"""How often the startup grace checks whether the upstreams it waits for have reported."""


class SourceSync:
    """The gateway's backends and catalogs, kept in sync with the registry (module docstring)."""

    def __init__(
        self,
        backends: Sequence[Backend],
        settings: Settings,
        manifest: Manifest | None,
        *,
        served: Served,
        sessions: SessionStore,
        notifier: Notifier,
        metrics: GatewayMetrics,
        find_cache: FindCache[Any],
    ) -> None:
        self.settings = settings
        self.manifest = manifest
        self.backends: dict[str, Backend] = {b.name: b for b in backends}  # the proxy reads this mapping
        self.served = served
        self.sessions = sessions
        self.notifier = notifier
        self.metrics = metrics
        self.find_cache = find_cache
        self._catalog_sources = {c.source for c in manifest.catalogs} if manifest else set()
        self._reported: set[str] = set()  # backends whose tool list was ingested at least once
        self._available: dict[str, bool] = {name: False for name in self.backends}
        self._ever_available: set[str] = set()
        self._stale: set[str] = set()
        self._registered: set[str] = set()  # sources with tools in the registry (refresh_stale_sources)
        self._started_at = time.monotonic()
        self._tasks: anyio.abc.TaskGroup | None = None  # start()'s: backends added later start there
        self.on_ingested: Callable[[], Awaitable[None]] | None = None
        """Run after each ingest of a backend's tools, before it counts as reported (the gateway leaves
        its first ready table there: ``server/turns/starting.py``)."""

    @property
    def registry(self) -> Registry:
        """The open registry (``Served.registry``: raises while it is not)."""
        return self.served.registry

    # -- the gateway's start ---------------------------------------------------------------------------
    def start(self, tasks: anyio.abc.TaskGroup) -> None:
        """Start every backend's owner task and the availability watch in ``tasks`` (the gateway's)."""
        self._tasks = tasks
        # Upstreams connect while the registry opens; their first tool lists wait for it.
        for backend in self.backends.values():
            tasks.start_soon(self._run_backend, backend)
        tasks.start_soon(self._watch_availability)

    async def ingest_catalogs(self) -> None:
        """The registry is open: ingest the manifest's catalogs (and the manifest's edges between them)."""
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
            edges = catalog.edges  # as the catalog declares them: the manifest's removes apply in its view
            await anyio.to_thread.run_sync(self.served.guard.review, entry.source, tools)
            summary = await anyio.to_thread.run_sync(
                partial(self.registry.ingest, entry.source, tools, edges)
            )
            log.info("catalog %s: %s", entry.source, summary)

    def catalogs_missing(self) -> bool:
        """Whether a catalog of the manifest has no tools in the registry yet (nothing to serve it from)."""
        if not self._catalog_sources:
            return False
        return not self._catalog_sources <= set(self.registry.sources())

    async def apply_overrides(self) -> None:
        """The manifest's dependency overrides (add / remove / pin, in this gateway's view of the shared
        graph: other replicas never walk them, and they go with this gateway) and its private tools."""
        if self.manifest is not None:
            await anyio.to_thread.run_sync(self.registry.set_overrides, graph_overrides(self.manifest))
            await anyio.to_thread.run_sync(self.registry.set_private, self.manifest.private)

    def warn_if_empty(self) -> None:
        if self.manifest is not None and not self.backends and not self._catalog_sources:
            log.warning(
                "the manifest defines no upstreams (servers, openapi) and no catalogs: only tools already "
                "in the registry at %s can be found, and none can be called",
                self.settings.home,
            )

    async def registry_opened(self) -> None:
        """Upstreams could not report before now: their startup grace starts with the registry. Sessions
        that listed before the registry was open lacked their pinned tools: tell them."""
        self._started_at = time.monotonic()
        for session in self.sessions:
            if any(
                self._source_of(tool_id) not in (None, *self.excluded_sources())
                for tool_id in session.published.ids()
            ):
                await self.notifier.tools_changed(session)

    # -- backends' tool lists --------------------------------------------------------------------------
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
        await self.served.ready.wait()  # upstreams connect while the registry is still opening
        if self.served.error is not None:
            self._reported.add(expected)  # nothing to wait for: calls answer the start error
            return
        try:
            if source != expected:
                log.warning("backend %s reported tools as source %r; using %r", expected, source, expected)
                source = expected
            if self.manifest is not None:  # its dependency overrides apply in this gateway's view alone:
                # the shared graph holds what the upstream declares, whichever replica ingests it
                tools = apply_tool_overrides(self.manifest, tools)
            registry = self.registry
            before = {t.id: t.content_hash for t in registry.tools(source)}
            held = await anyio.to_thread.run_sync(self.served.guard.review, source, list(tools))
            self.served.quarantine_changed()
            generation = registry.loaded_generation
            summary = await anyio.to_thread.run_sync(
                partial(registry.ingest, source, list(tools), list(edges))
            )
            if registry.loaded_generation != generation:
                # not for an upstream re-listing what the registry holds: every replica's upstreams do,
                # and clearing would send every cached answer back to the model
                self.find_cache.clear()
            self.refresh_stale_sources()
            log.info("%s: %d tools (%s)", source, len(tools), summary)
            after = {t.id: t.content_hash for t in tools}
            removed = (set(before) - set(after)) | held  # quarantined tools leave every published set
            changed = {i for i, h in after.items() if before.get(i) not in (None, h)}
            added = set(after) - set(before)
            await self.republish(removed=removed, changed=changed, added=added)
            if self.on_ingested is not None:
                await self.on_ingested()
        except Exception:  # a bad tool list must not kill the backend's owner task
            log.exception("could not ingest the tools of %s", source)
        finally:
            self._reported.add(expected)

    async def republish(self, *, removed: set[str], changed: set[str], added: set[str]) -> None:
        """Tell sessions whose published set changed: tools removed (dropped from the set), changed, or
        added where pinned. Also for another replica's commit (``server/sessions/replica.py``)."""
        pinned = set(self.settings.publish.pinned)
        for session in self.sessions:
            ids = set(session.published.ids())
            dropped = session.published.discard(removed & ids)
            if dropped.changed:
                await self.sessions.commit(session)
            if dropped.changed or (changed & ids) or (added & pinned):
                await self.notifier.tools_changed(session)

    # -- sources other replicas share (server/sessions/replica.py)
    # ----------------------------------------------
    def add_backend(self, backend: Backend) -> None:
        """Serve a source another replica shared: its owner task starts beside the others."""
        if self._tasks is None or backend.name in self.backends:
            return
        self.backends[backend.name] = backend
        self._available[backend.name] = False
        self._tasks.start_soon(self._run_backend, backend)

    def add_shared_catalogs(self, sources: set[str]) -> None:
        """Catalog sources another replica ingested: their tools are served here too."""
        self._catalog_sources |= sources

    # -- availability ----------------------------------------------------------------------------------
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
            # at shutdown every upstream goes: the stop's own line says so
            level = logging.DEBUG if STOPPING.is_set() else logging.INFO
            log.log(level, "upstream %s is %s", name, "available" if now else "unavailable")
            for session in self.sessions:
                if any(self._source_of(t) == name for t in session.published.ids()):
                    await self.notifier.tools_changed(session)

    async def first_connections(self, sources: set[str] | None = None, *, for_call: bool = False) -> None:
        """Wait out the startup grace for upstreams still on their first connection attempt, until
        their first tool list is in the registry (connected is not enough: it may still be ingesting).
        A turn does not wait for one whose tools the registry holds from an earlier run (they are
        published meanwhile); a call of one of them (``for_call``) does."""
        deadline = self._started_at + min(STARTUP_GRACE_S, self.settings.connect_timeout_s)
        while time.monotonic() < deadline:
            pending = [
                name
                for name, backend in self.backends.items()
                if (sources is None or name in sources)
                and name not in self._reported
                and backend.last_error is None  # its attempt failed: no point waiting for it
                and (for_call or name not in self._registered)  # known tools: a turn need not wait
            ]
            if not pending:
                return
            await anyio.sleep(FIRST_LIST_POLL_S)

    async def connected_once(self, source: str) -> None:
        """Wait out the startup grace for ``source`` if it is a backend that was never available yet."""
        if source in self.backends and source not in self._ever_available:
            await self.first_connections({source}, for_call=True)

    # -- what is visible -------------------------------------------------------------------------------
    def _source_of(self, tool_id: str) -> str | None:
        record = self.served.find(tool_id)
        return record.source if record else None

    def serves(self, source: str) -> bool:
        """Whether a backend or catalog of this gateway serves ``source`` (false for a stale source)."""
        return source not in self._stale

    def excluded_sources(self) -> set[str]:
        """Sources not to publish or retrieve: disconnected backends, and registry sources this
        manifest does not define (left over from another run). A backend still on its first connection
        attempt whose tools the registry holds from an earlier run is not excluded: its tools can be
        published at once (a busy machine's first turn must not wait for every upstream to start), and
        a call of one waits for that first connection (``CallPath``)."""
        excluded = {
            name for name, b in self.backends.items() if not b.available and not self._first_attempt(name, b)
        }
        return excluded | self._stale if self._stale else excluded

    def _first_attempt(self, name: str, backend: Backend) -> bool:
        """Whether ``backend`` is on its first connection attempt with its tools known to the registry."""
        return name in self._registered and name not in self._ever_available and backend.last_error is None

    def refresh_stale_sources(self) -> None:
        """Recompute which registry sources no backend or catalog serves (also after another replica's
        commit). Computed after each ingest, not per request: listing sources walks every tool (10k+)."""
        self._registered = set(self.registry.sources())
        if self.manifest is None:
            return
        known = set(self.backends) | self._catalog_sources
        self._stale = {s for s in self._registered if s not in known}
