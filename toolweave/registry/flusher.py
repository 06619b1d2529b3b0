"""The flusher: writes buffered observations to the registry in batches, off the request path.

One thread per open registry, started by the first observation. Every ``Settings.usage_flush_s``, when
the buffer fills, and at ``Registry.close`` it takes everything buffered (``observations.Batch``), lets
each sink (book) embed what it needs, then, under the writer lease, lets each write its part and
commits once. Followers therefore reload once per flush, not once per call. A flush that fails puts
its batch back; the thread never raises into anyone's call.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence

from toolweave.errors import ToolweaveError
from toolweave.registry.commits import Commits
from toolweave.registry.follower import Deferrable
from toolweave.registry.observations import Batch, Observations, Sink
from toolweave.registry.state import RegistryState

__all__ = ["FLUSH_LEASE_WAIT_S", "Flusher"]

log = logging.getLogger(__name__)

FLUSH_LEASE_WAIT_S = 10.0
"""How long a flush waits for another process's write before it gives up until the next one (the batch
is kept): a flush is never urgent, and it holds this process's write lock meanwhile."""


class Flusher:
    """Writes ``Observations`` to the registry in batches, from its own thread (started on first use)."""

    def __init__(
        self,
        state: RegistryState,
        commits: Commits,
        observations: Observations,
        sinks: Sequence[Sink],
        every_s: float,
    ) -> None:
        self._state = state
        self._commits = commits
        self._observations = observations
        self._sinks = tuple(sinks)
        self._every_s = every_s
        self._wake = threading.Event()
        self._closing = threading.Event()
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()
        self._flush_lock = threading.Lock()  # one flush at a time: the thread's, an explicit one, close's
        self._failing = False  # logged once per outage
        observations.on_full = self._wake.set

    def start(self) -> None:
        """Start the flush thread if it is not running (cheap when it is)."""
        if self._thread is not None or self._closing.is_set():
            return
        with self._start_lock:
            if self._thread is None and not self._closing.is_set():
                self._thread = threading.Thread(target=self._run, name="toolweave-flush", daemon=True)
                self._thread.start()

    def _run(self) -> None:
        while True:
            self._wake.wait(self._every_s)
            self._wake.clear()
            if self._closing.is_set():
                return  # close() flushes what is left, once the thread is gone
            try:
                self.flush()
            except Exception:  # a bug must not stop the flushing for good
                log.exception("registry %s: flushing observations failed", self._state.path)

    def flush(self) -> bool:
        """Write everything buffered: one write per kind, one commit. True when a generation was
        committed. A failure puts the batch back (the next flush retries it) and returns False."""
        with self._flush_lock:
            return self._flush()

    def _flush(self) -> bool:
        batch = self._observations.take()
        if not len(batch):
            return False
        try:
            for sink in self._sinks:
                sink.prepare(batch)
            with self._state.write_lock, self._commits.writer(FLUSH_LEASE_WAIT_S, defer=self._unread(batch)):
                wrote = [sink.write(batch) for sink in self._sinks]
                if any(wrote):
                    self._commits.commit("observations")
            for sink, did in zip(self._sinks, wrote, strict=True):
                if did:
                    sink.swap_in()
        except BaseException as exc:
            self._observations.put_back(batch)
            if not isinstance(exc, ToolweaveError):
                raise
            if not self._failing:
                self._failing = True
                log.warning(
                    "registry %s: could not write %d observations, kept for the next flush: %s",
                    self._state.path,
                    len(batch),
                    exc,
                )
            return False
        if self._failing:
            self._failing = False
            log.warning("registry %s: observations are written again", self._state.path)
        if self._observations.dropped:
            log.warning(
                "registry %s: %d observations were dropped unwritten (the buffer stayed full)",
                self._state.path,
                self._observations.dropped,
            )
            self._observations.dropped = 0
        return any(wrote)

    def _unread(self, batch: Batch) -> Deferrable | None:
        """What of other writers' changes the batch's write does not read, so the flush need not load it
        under the writer lock (the next poll does): a long ingest's 2,000-tool commits made every
        replica's flush read the rows and edges it wrote while holding the lock, seconds each, and the
        other replicas' flushes waited behind those reads. Usage examples read only their tools' examples
        and whether their tools are still there (their sources' rows); sightings read the graph, so a
        batch with any loads everything."""
        if batch.sightings:
            return None
        sources = self._state.snap.sources
        ours = {sources.get(call.tool_id) for call in batch.usage}

        def unread(kind: str, keys: list[str] | None) -> bool:
            if kind == "edges":
                return True
            return kind == "tools" and keys is not None and ours.isdisjoint(keys)

        return unread

    def close(self) -> None:
        """Stop the thread and write what is buffered (graceful shutdown loses nothing)."""
        self._closing.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join()
        if len(self._observations) and not self.flush():
            log.warning(
                "registry %s: %d observations could not be written before closing and are lost",
                self._state.path,
                len(self._observations),
            )
