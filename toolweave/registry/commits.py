"""The one door every registry write goes through: the writer lease, catching up, rollback, the commit.

A write (ingest, edges, overrides, a batch of observations, source specs, a vector index) runs inside
``Commits.writer()``: it holds the writer lease (another process's write finishes first), loads what
other processes committed since this snapshot (so it builds on the newest registry), and rolls back on
error. It ends with ``Commits.commit``, which writes the commit record naming the new table versions:
the last step of any write (``toolweave.registry.database``). See docs/registry.md ("Commits", "Replicas").
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

from toolweave.errors import RegistryError
from toolweave.registry.follower import Follower
from toolweave.registry.state import RegistryState

__all__ = ["LEASE_WAIT_S", "Commits"]

log = logging.getLogger(__name__)

LEASE_WAIT_S = 300.0
"""How long a write waits for another process's write (an ingest of 10k tools takes minutes)."""
_COMPACT_EVERY = 50


class Commits:
    """Writes under the lease, rolled back on error, made the registry by the commit record."""

    def __init__(self, state: RegistryState, follower: Follower) -> None:
        self._state = state
        self._follower = follower
        self._writes = 0

    @contextmanager
    def writer(self, wait_s: float = LEASE_WAIT_S, *, rollback: bool = True) -> Iterator[None]:
        """A write: hold the writer lease, catch up with what other processes committed, and
        (``rollback``) roll back on error. Call it with ``state.write_lock`` held. An ingest checks its
        input first and rolls back only what follows (``rollback=False`` + ``rollback_on_error``)."""
        with self._state.db.lease.held(wait_s):
            self._follower.catch_up()
            if not rollback:
                yield
                return
            with self.rollback_on_error():
                yield

    @contextmanager
    def rollback_on_error(self) -> Iterator[None]:
        """A write that fails half-way (bad input found late, a store error, Ctrl-C) leaves the last
        committed state, on disk and in memory: nothing is half-written for the next reader."""
        try:
            yield
        except BaseException:
            try:
                self._state.db.roll_back()
                self._follower.load_committed()
            except RegistryError:
                log.exception(
                    "registry %s: rolling back a failed write failed; the next open retries", self._state.path
                )
            raise

    def commit(self, action: str, *, graph: bool = False, compact: bool = True) -> None:
        """Make this write the registry: with ``graph``, the edge table first (and what searches read of
        the graph is published after); then the commit record, the last step."""
        state = self._state
        if graph:
            state.db.side.save_edges(state.graph.edges())
        if compact:
            self._compact_now_and_then()
        state.db.commit(action=action, tools=state.table, usage=state.usage)
        state.loaded_generation = state.db.committed_generation()
        if graph:
            state.publish_graph()

    def _compact_now_and_then(self) -> None:
        """Every LanceDB write leaves a table version; merge them now and then (a long-running
        gateway re-ingests whenever an upstream changes). A failed compaction costs only disk.
        Compaction makes new table versions (same rows), so it runs before a commit names them."""
        self._writes += 1
        if self._writes % _COMPACT_EVERY:
            return
        state = self._state
        for table in (state.table, state.usage):
            try:
                table.compact()
            except RegistryError:
                log.warning("compacting %s failed; will try again later", table.name, exc_info=True)
        state.db.compact()
