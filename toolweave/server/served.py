"""What a gateway serves from: the registry, opened in the background, and the guard beside it.

Instant start: given a registry *opener* instead of a registry, the gateway answers ``initialize`` and
``tools/list`` (meta-tools) at once and opens the registry in the background (LanceDB, numpy and the
embedder are imported there, not before the handshake). ``Served`` is that registry's state, read by
every part of the gateway: until the background start is over (``ready``), ``registry`` raises; a
start that failed leaves ``error`` set, and every later ``find_tools`` or call answers with it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import anyio

from toolweave.errors import RegistryError
from toolweave.policy import Policy
from toolweave.records import ToolRecord
from toolweave.server.calls.guard import Guard
from toolweave.server.calls.metrics import GatewayMetrics
from toolweave.server.fronts.shutdown import finishing
from toolweave.settings import SecuritySettings

if TYPE_CHECKING:  # the registry (LanceDB, numpy, networkx) is imported in the background start
    from toolweave.registry import Registry

__all__ = ["REGISTRY_WAIT_S", "Served"]

REGISTRY_WAIT_S = 30.0
"""How long ``find_tools``, calls and host turns wait for the registry the gateway opens in the
background (10,000 tools open in a few seconds on a busy 2-core machine); after that they answer
``unavailable``."""


class Served:
    """The registry a gateway serves and its guard (policy and quarantine); see the module docstring."""

    def __init__(
        self,
        registry: Registry | Callable[[], Registry],
        security: SecuritySettings,
        policy: Policy,
        metrics: GatewayMetrics,
    ) -> None:
        # An opener is called in the background start (and the registry closed on the way out).
        self._opener = registry if callable(registry) else None
        self._registry: Registry | None = None
        self._security = security
        self._policy = policy
        self._metrics = metrics
        self.error: str | None = None
        """Why the background start failed (None: it did not, or is not over)."""
        self.ready = anyio.Event()
        """Set once the background start is over: registry open, catalogs ingested (or it failed)."""
        self._was_ready = False
        self.guard: Guard  # set with the registry: its quarantine lives beside it
        if not callable(registry):
            self._attach(registry)

    @property
    def registry(self) -> Registry:
        """The open registry; ``RegistryError`` while it is still opening or could not be opened."""
        if self._registry is None:
            raise RegistryError(self.error or "the tool registry is still opening")
        return self._registry

    def find(self, tool_id: str) -> ToolRecord | None:
        """The tool ``tool_id``; None while the registry is not open."""
        return None if self._registry is None else self._registry.find(tool_id)

    def is_ready(self) -> bool:
        """Whether the registry is open with the manifest's catalogs in it (false if that failed). Once
        true it stays true (a failed start sets ``error`` before ``ready``), so it is remembered: every
        call asks, twice."""
        if self._was_ready:
            return True
        self._was_ready = self.ready.is_set() and self.error is None
        return self._was_ready

    async def open(self) -> None:
        """Open the registry, when given an opener (in a worker thread)."""
        if self._opener is not None:
            # abandon_on_cancel: a client that leaves during the start must not wait for it
            self._attach(await anyio.to_thread.run_sync(self._opener, abandon_on_cancel=True))

    def close(self) -> None:
        """Close the registry if this gateway opened it: its last flush writes the usage examples and
        traffic evidence buffered since the previous one, so the exit deadline lets it end (``finishing``)."""
        if self._opener is not None and self._registry is not None:
            with finishing("the registry's last flush"):
                self._registry.close()

    async def wait(self) -> bool:
        """Wait (at most ``REGISTRY_WAIT_S``) for the background start; whether the registry is usable."""
        if self._was_ready:
            return True
        if not self.ready.is_set():
            with anyio.move_on_after(REGISTRY_WAIT_S):
                await self.ready.wait()
        return self.is_ready()

    def quarantine_changed(self) -> None:
        self._metrics.quarantined.set(len(self.guard.held))

    def _attach(self, registry: Registry) -> None:
        """The registry is open: its guard (quarantine beside it) and shared query runs come with it."""
        self.guard = Guard(registry, self._security, self._policy)
        # throughput: concurrent turns share model runs; repeated questions are answered from a cache
        registry.embedder.share_query_runs()
        self._registry = registry
        self.quarantine_changed()
