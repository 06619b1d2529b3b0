"""The follower: brings this process's read model to the registry's committed generation.

At open, after a rollback, when a write catches up under the lease, and when a gateway polls
(``refresh``), the follower reads the commit record and loads the tables at the versions it names:
tools (the snapshot), usage examples, edges (the graph), overrides and source specs. Nothing a writer
has not committed is ever read. See docs/registry.md ("Replicas").
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

import numpy as np

from toolweave.errors import RegistryError
from toolweave.records import ToolRecord
from toolweave.registry.database import graph_from_rows
from toolweave.registry.snapshot import Snapshot
from toolweave.registry.sources import SourceSpec
from toolweave.registry.state import RegistryState
from toolweave.registry.usage_book import UsageBook
from toolweave.registry.vector_index import index_state

__all__ = ["Follower"]

log = logging.getLogger(__name__)


class Follower:
    """Loads committed generations into the shared ``RegistryState``."""

    def __init__(self, state: RegistryState, usage: UsageBook) -> None:
        self._state = state
        self._usage = usage

    def load_committed(self) -> None:
        """Snapshot, graph, usage, overrides and source specs from the committed tables."""
        state, db = self._state, self._state.db
        state.table = db.tool_table()
        state.usage = db.usage_table()
        self._usage.load()
        state.overrides = db.side.load_overrides()
        state.sources = tuple(SourceSpec(**row) for row in db.side.load_sources())
        state.loaded_generation = db.committed_generation()
        self.reload()
        state.graph = graph_from_rows(state.snap.nodes(), db.side.load_edges())
        state.publish_graph()

    def reload(self) -> None:
        """A new snapshot from the tool table (as this handle sees it: a writer sees its own rows)."""
        state = self._state
        table = state.table
        ann = table.count() >= state.settings.vector_index_threshold
        records: Mapping[str, ToolRecord]
        if ann:  # neither vectors nor decoded records in memory: see docs/registry.md "Large registries"
            id_list, source_list, hash_list, name_list, records = table.load_compact()
            matrix = np.zeros((0, 1), np.float32)
        else:
            rows = table.load_all()
            id_list = [r.record.id for r in rows]
            source_list = [r.record.source for r in rows]
            hash_list = [r.content_hash for r in rows]
            name_list = [r.record.name for r in rows]
            records = {r.record.id: r.record for r in rows}
            matrix = np.stack([r.vector for r in rows]) if rows else np.zeros((0, 1), np.float32)
        ids = tuple(id_list)
        names = tuple(sorted(set(source_list)))
        code = {name: n for n, name in enumerate(names)}
        usage_rows, usage_matrix = self._usage.snapshot_rows(ids)
        last = state.snap
        state.snap = Snapshot(
            ids=ids,
            matrix=matrix,
            records=records,
            hashes=dict(zip(ids, hash_list, strict=True)),
            sources=dict(zip(ids, source_list, strict=True)),
            source_codes=np.fromiter((code[s] for s in source_list), np.int32, len(ids)),
            source_names=names,
            usage_rows=usage_rows,
            usage_matrix=usage_matrix,
            ann=ann,
            ann_refine=ann and not index_state(table).exact,
            names=last.names.following(last.ids, ids, dict(zip(ids, name_list, strict=True))),
        )  # ``rows``: read by the first search (in the background), not on the ingest's or open's path
        for tool_id, kind, source in state.snap.nodes():  # graph nodes follow the rows (rebuilt at open)
            if tool_id not in state.graph:
                state.graph.add_tool(tool_id, kind, source)

    def catch_up(self) -> None:
        """Under the lease: roll back what a dead writer left uncommitted, and load what others
        committed since this snapshot, so a write builds on the newest registry."""
        state = self._state
        head = state.db.recover()
        if head is None:
            raise RegistryError(f"registry {state.path} lost its commit record")
        if head.generation != state.loaded_generation:
            self.load_committed()
            state.foreign_loads += 1
        else:  # same state: handles opened at an older committed version may be read-only
            state.table.writable()
            state.usage.writable()

    def current(self) -> bool:
        """Whether the snapshot shows the newest committed generation (one small read)."""
        return self._state.db.generation() == self._state.loaded_generation

    def refresh(self) -> bool:
        """Load the newest committed generation when another process committed one (a gateway polls
        this every ``Settings.registry_poll_s``); False, after reading one small row, when nothing
        changed."""
        state = self._state
        if self.current():
            return False
        with state.write_lock:
            head = state.db.reread_head()
            if head.generation == state.loaded_generation:
                return False
            if head.embedding_model != state.embedder.model_id:
                log.error(
                    "registry %s was re-indexed with %s by another process; restart with that model",
                    state.path,
                    head.embedding_model,
                )
                return False
            self.load_committed()
            state.foreign_loads += 1
        log.info("registry %s: loaded generation %d (%s)", state.path, head.generation, head.action)
        return True
