"""Upkeep of a large registry's ANN index, on a background thread: refresh it after an ingest, and
re-read the row addresses searches name hits from. See docs/registry.md ("Large registries")."""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

from toolweave.errors import ToolweaveError
from toolweave.registry.commits import Commits
from toolweave.registry.state import RegistryState
from toolweave.registry.vector_index import (
    VectorIndexParams,
    index_state,
    refresh,
    row_map,
)

__all__ = ["VectorIndexUpkeep"]

log = logging.getLogger(__name__)


class VectorIndexUpkeep:
    """The ANN index of the tool table (at or above ``Settings.vector_index_threshold`` tools)."""

    def __init__(self, state: RegistryState, commits: Commits) -> None:
        self._state = state
        self._commits = commits
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="toolweave-ann")
        self._index_queued = False
        self._remap_queued = False

    @property
    def in_use(self) -> bool:
        """Whether vectors are searched through the ANN index (``Settings.vector_index_threshold``)."""
        return self._state.snap.ann

    @property
    def params(self) -> VectorIndexParams:
        settings = self._state.settings
        return VectorIndexParams(
            settings.vector_index_ef, settings.vector_index_refine, settings.vector_index_kind
        )

    def refresh(self) -> str:
        """Bring the ANN index up to date with the rows now, and commit it: ``built``, ``merged`` (new
        rows added to it), ``current`` or ``none`` (below the size threshold). Ingests schedule this on
        the background thread (``refresh_later``); searches meanwhile search the rows the index lacks flat."""
        state = self._state
        with state.write_lock:
            self._index_queued = False
            if not state.snap.ann:
                return "none"
            with self._commits.writer():  # the lock: another replica may be writing this registry
                done = refresh(state.table, state.settings.vector_index_kind)
                if done != "current":
                    state.changes.touch("tools")  # a new version of the same rows
                    self._commits.commit(f"vector index {done}", compact=False)
                    refined = not index_state(state.table).exact
                    state.snap = replace(state.snap, ann_refine=refined, rows=row_map(state.table))
            log.info("registry %s: vector index %s (%d tools)", state.path, done, len(state.snap.ids))
            return done

    def refresh_later(self) -> None:
        """Schedule ``refresh`` on the background thread (once, however many ingests ask)."""
        if not self._state.snap.ann or self._index_queued:
            return
        self._index_queued = True
        try:
            self._pool.submit(self._refresh_logged)
        except RuntimeError:  # closed: the next open refreshes it
            self._index_queued = False

    def remap_rows_later(self) -> None:
        """Read the row addresses on the background thread, after the write under way: after a reload
        (at open, after an ingest) and after a write that moved the table (a compaction)."""
        if self._remap_queued:
            return
        self._remap_queued = True
        try:
            self._pool.submit(self._remap_rows)
        except RuntimeError:  # closed
            self._remap_queued = False

    def close(self) -> None:
        """A build under way finishes and commits first (an interrupted one would only be rolled back at
        the next open); queued work is dropped."""
        self._pool.shutdown(wait=True, cancel_futures=True)

    def _remap_rows(self) -> None:
        state = self._state
        with state.write_lock:
            self._remap_queued = False
            snap = state.snap
            if snap.ann and (snap.rows is None or snap.rows.version != state.table.version):
                try:
                    state.snap = replace(snap, rows=row_map(state.table))
                except ToolweaveError:  # searches read ids from the table meanwhile: slower, complete
                    log.warning("registry %s: reading the row addresses failed", state.path, exc_info=True)

    def _refresh_logged(self) -> None:
        try:
            self.refresh()
        except ToolweaveError:
            # rolled back already; searches stay complete (rows no index covers are searched flat)
            log.warning("registry %s: refreshing the vector index failed", self._state.path, exc_info=True)
