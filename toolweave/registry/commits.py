"""The one door every registry write goes through: the writer lock, catching up, rollback, the commit.

A write (ingest, edges, overrides, a batch of observations, source specs, a vector index) runs inside
``Commits.writer()``: it holds the writer lock (another process's write finishes first), loads what
other processes committed since this snapshot (so it builds on the newest registry), and rolls back on
error. It ends with ``Commits.commit``, which writes the commit record naming the new table versions
and what the write changed (``RegistryState.changes``, for followers): the last step of any write
(``toolweave.registry.database``). A write fenced out (another writer holds the lock now) rolls back
nothing on disk (the new holder's catch-up does) and reloads the committed state. See docs/registry.md
("Commits", "Writers").
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

from toolweave.errors import RegistryError
from toolweave.registry.follower import Deferrable, Follower
from toolweave.registry.state import RegistryState

__all__ = ["LOCK_WAIT_S", "Commits"]

log = logging.getLogger(__name__)

LOCK_WAIT_S = 600.0
"""How long a write waits for another process's write (an ingest of 10k tools on a busy machine takes
minutes; an index build at 100k longer)."""
_COMPACT_EVERY = 50


class Commits:
    """Writes under the lease, rolled back on error, made the registry by the commit record."""

    def __init__(self, state: RegistryState, follower: Follower) -> None:
        self._state = state
        self._follower = follower
        self._writes: dict[str, int] = {}
        """Commits of this process that wrote each table ("tools", "usage"; "commit": every commit)."""

    @contextmanager
    def writer(
        self, wait_s: float = LOCK_WAIT_S, *, rollback: bool = True, defer: Deferrable | None = None
    ) -> Iterator[None]:
        """A write: hold the writer lock, catch up with what other processes committed, and
        (``rollback``) roll back on error. Call it with ``state.write_lock`` held. An ingest checks its
        input first and rolls back only what follows (``rollback=False`` + ``rollback_on_error``).
        ``defer``: kinds of change the write does not read, left unloaded (``Follower.catch_up``)."""
        with self._state.db.lock.held(wait_s):
            self._follower.catch_up(defer)
            if not rollback:
                yield
                return
            with self.rollback_on_error():
                yield

    @contextmanager
    def rollback_on_error(self) -> Iterator[None]:
        """A write that fails half-way (bad input found late, a store error, Ctrl-C) leaves the last
        committed state, on disk and in memory: nothing is half-written for the next reader."""
        state = self._state
        try:
            yield
        except BaseException:
            state.changes.clear()
            try:
                if self._still_holding():
                    state.db.roll_back()
                else:  # fenced out: the tables are the new holder's now; it rolls back our leftovers
                    state.db.reread_head()
                self._follower.load_committed()
            except RegistryError:
                log.exception(
                    "registry %s: rolling back a failed write failed; the next open retries", self._state.path
                )
            raise

    def _still_holding(self) -> bool:
        try:
            self._state.db.lock.check()
        except RegistryError:
            return False
        return True

    def commit(
        self, action: str, *, graph: bool = False, compact: bool = True, everything: bool = False
    ) -> None:
        """Make this write the registry: with ``graph``, the edge table first (and what searches read of
        the graph is swapped in after); then the commit record, the last step. ``everything``: followers
        must load the whole registry (the change is not one of rows, edges or examples)."""
        state = self._state
        changes = state.changes
        wrote = {kind for kind in ("tools", "usage") if changes.noted(kind)}  # before the touches below
        if graph:
            state.db.side.save_edges(state.graph.edges())
            changes.touch_some("edges", state.graph.peek_changed())
        if everything:
            changes.everything()
        committed = state.db.head.versions if state.db.head is not None else {}
        for kind, table in (("tools", state.table), ("usage", state.usage)):
            if committed.get(table.name) != table.version and not changes.noted(kind):
                changes.touch_all(kind)  # written without saying what changed: followers read it whole
        if compact:
            self._compact_now_and_then(wrote)
        state.db.commit(action=action, tools=state.table, usage=state.usage, delta=changes.take())
        state.loaded_generation = state.db.committed_generation()
        if graph:
            state.swap_in_graph()

    def _compact_now_and_then(self, wrote: set[str]) -> None:
        """Every LanceDB write leaves a table version; merge them now and then (a long-running
        gateway re-ingests whenever an upstream changes). A failed compaction costs only disk.
        Compaction makes new table versions (same rows), so it runs before a commit names them.

        Each table is compacted after this process wrote it ``_COMPACT_EVERY`` times: a usage flush
        compacting the tool table under the writer lock took 5.6 s beside a 10k-tool ingest (whose
        own writes compact it), and every other replica's flush waited for it."""
        state = self._state
        for kind, table in (("tools", state.table), ("usage", state.usage)):
            if kind not in wrote or not self._count(kind):
                continue
            state.changes.touch(kind)  # new versions of the same rows
            try:
                table.compact()
            except RegistryError:
                log.warning("compacting %s failed; will try again later", table.name, exc_info=True)
        if self._count("commit"):  # the side tables and the commit record: small
            state.db.compact()

    def _count(self, kind: str) -> bool:
        """Count a write of ``kind``; True on every ``_COMPACT_EVERY``-th."""
        self._writes[kind] = self._writes.get(kind, 0) + 1
        return self._writes[kind] % _COMPACT_EVERY == 0
