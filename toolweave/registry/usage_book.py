"""The usage book: each tool's usage examples (Tool2Vec), in memory and in the usage table.

Examples come from manifests and catalogs (declared with the tool, synced by an ingest) and from
successful calls (recorded by the gateway). Recording a call is an append to the ``Observations``
buffer and nothing else; the ``Flusher`` hands the buffered calls back here in batches (the book is
its ``Sink``): embedded, merged into the examples, written to the table under the flush's writer lock and
commit, and only then fused into the snapshot's usage vectors, once per batch. Private tools
(``set_private``) are never recorded. See ``toolweave.registry.usage`` for the vectors themselves.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import replace

import numpy as np

from toolweave.records import ToolRecord
from toolweave.registry.observations import Batch, Observations, UsageCall
from toolweave.registry.state import RegistryState
from toolweave.registry.usage import (
    UsageExample,
    abstract_values,
    merge_examples,
    now_ns,
    text_key,
    usage_vector,
)

__all__ = ["UsageBook"]


class UsageBook:
    """Tool id → its usage examples, newest first; the ``Sink`` of buffered usage calls."""

    def __init__(self, state: RegistryState, observations: Observations) -> None:
        self._state = state
        self._observations = observations
        self.by_tool: dict[str, list[UsageExample]] = {}
        self._private: frozenset[str] = frozenset()
        self._vectors: dict[str, np.ndarray] = {}
        """Query text → vector, for the batch being flushed (embedded before the writer lock is taken)."""

    def load(self, tool_ids: Collection[str] | None = None) -> None:
        """The committed examples (the follower calls it with the tables it just opened): all, or those
        of ``tool_ids`` (another process's commit changed them)."""
        if tool_ids is None:
            self.by_tool = self._state.usage.load_all()
            return
        loaded = self._state.usage.load_all(tool_ids)
        for tool_id in tool_ids:
            if tool_id in loaded:
                self.by_tool[tool_id] = loaded[tool_id]
            else:
                self.by_tool.pop(tool_id, None)

    # -- the call path ---------------------------------------------------------------------------------
    def record(self, tool_id: str, query: str) -> bool:
        """Buffer ``query`` (the request that led to a successful call of ``tool_id``) as a usage example.

        An append in memory: no embedding, no storage, no exception. False, buffering nothing, when
        usage vectors are off, the tool is unknown or private, or ``query`` is already its newest example.
        """
        state = self._state
        # the values a user typed (ids, numbers, emails, tokens) never reach the shared registry
        query = (query if state.settings.usage_keep_values else abstract_values(query)).strip()
        if not query or not state.usage_on or tool_id not in state.snap.records or self.is_private(tool_id):
            return False
        key = text_key(query)
        newest = self._observations.newest_usage(tool_id)
        if newest is None:
            stored = self.by_tool.get(tool_id)
            newest = text_key(stored[0].query) if stored else None
        if newest == key:
            return False
        return self._observations.add_usage(UsageCall(tool_id, query, now_ns()))

    def is_private(self, tool_id: str) -> bool:
        source = self._state.snap.sources.get(tool_id)
        return tool_id in self._private or (source is not None and source in self._private)

    def set_private(self, names: Collection[str]) -> dict[str, list[UsageExample]]:
        """Make ``names`` (tool ids or whole sources) private: their buffered calls are forgotten.
        Returns the examples to write for private tools that have recorded calls stored (their
        declared examples stay); the caller writes them under the writer lock."""
        self._private = frozenset(names)
        self._observations.discard(self.is_private)
        return self.private_calls()

    def private_calls(self) -> dict[str, list[UsageExample]]:
        """Tool id → its examples without recorded calls, for private tools that have recorded calls."""
        return {
            tool_id: [e for e in examples if e.origin != "call"]
            for tool_id, examples in self.by_tool.items()
            if self.is_private(tool_id) and any(e.origin == "call" for e in examples)
        }

    # -- the flush (``observations.Sink``) -------------------------------------------------------------
    def prepare(self, batch: Batch) -> None:
        """Embed the batch's queries (usually cached: the same texts were just retrieved with)."""
        texts = list(dict.fromkeys(c.query for c in batch.usage))
        self._vectors = (
            dict(zip(texts, self._state.embedder.embed_queries(texts), strict=True)) if texts else {}
        )

    def write(self, batch: Batch) -> bool:
        """Merge the batch's calls into the examples (as the registry now is: the flush caught up) and
        write the tools they changed. Calls of tools gone or made private since are dropped."""
        by_call: dict[str, list[UsageExample]] = {}
        records = self._state.snap.records
        for call in sorted(batch.usage, key=lambda c: c.at_ns):
            if call.tool_id in records and not self.is_private(call.tool_id):
                # recorded calls age by count, not by a replica's clock: each is stamped after every
                # example the tool holds (a replica whose clock runs a day ahead does not keep its
                # examples over the next replica's newer ones)
                held = by_call.get(call.tool_id) or self.by_tool.get(call.tool_id, [])
                after = max((e.at_ns for e in held), default=0) + 1
                example = UsageExample(
                    call.tool_id, call.query, "call", max(call.at_ns, after), self._vectors[call.query]
                )
                by_call.setdefault(call.tool_id, []).insert(0, example)
        cap = self._state.settings.usage_cap
        updates = {
            tool_id: merge_examples(self.by_tool.get(tool_id, []), new, cap)
            for tool_id, new in by_call.items()
        }
        changed = {t: e for t, e in updates.items() if _keys(e) != _keys(self.by_tool.get(t, []))}
        self._vectors = {}
        if changed:
            self.save(changed)
        return bool(changed)

    def swap_in(self) -> None:
        """Fuse the examples into the snapshot's usage vectors (after a flush, or a write of examples)."""
        state = self._state
        rows, matrix = self.snapshot_rows(state.snap.ids)
        state.snap = replace(state.snap, usage_rows=rows, usage_matrix=matrix)

    # -- writes under another part's lease ------------------------------------------------------------
    def save(self, updates: dict[str, list[UsageExample]]) -> None:
        """Make ``updates`` the examples of their tools, in the table and in memory (not yet committed,
        not yet in the snapshot: see ``swap_in``)."""
        self._state.usage.replace(list(updates), [e for examples in updates.values() for e in examples])
        self._state.changes.touch("usage", updates)
        for tool_id, examples in updates.items():
            if examples:
                self.by_tool[tool_id] = examples
            else:
                self.by_tool.pop(tool_id, None)

    def sync_examples(self, changed: Sequence[ToolRecord], removed: Collection[str]) -> None:
        """An ingest's part: declared examples of changed tools replace their old declared ones (recorded
        calls stay); removed tools lose every example. Texts already stored keep their vectors."""
        by_tool, cap = self.by_tool, self._state.settings.usage_cap
        stale = [
            t
            for t in changed
            if [e.query for e in by_tool.get(t.id, []) if e.origin == "example"] != list(t.examples[:cap])
        ]
        gone = [i for i in removed if i in by_tool]
        if not stale and not gone:
            return
        known = {e.query: e.vector for examples in by_tool.values() for e in examples}
        missing = list(dict.fromkeys(q for t in stale for q in t.examples if q not in known))
        if missing:
            # examples are requests: embedded as requests are (a query encoder's own model, if any)
            known.update(zip(missing, self._state.embedder.request_vectors(missing), strict=True))
        at = now_ns()
        updates: dict[str, list[UsageExample]] = {i: [] for i in gone}
        for tool in stale:
            # declared order is kept: the first example counts as the newest
            declared = [
                UsageExample(tool.id, q, "example", at - n, known[q])
                for n, q in enumerate(tool.examples[:cap])
            ]
            calls = [e for e in by_tool.get(tool.id, []) if e.origin == "call"]
            updates[tool.id] = merge_examples(calls, declared, cap)
        self.save(updates)  # the ingest reloads the snapshot

    def snapshot_rows(self, ids: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """(rows of ``ids`` that have usage examples, their usage vectors)."""
        by_tool = self.by_tool
        rows = [n for n, tool_id in enumerate(ids) if by_tool.get(tool_id)]
        matrix = (
            np.stack([usage_vector(by_tool[ids[n]]) for n in rows])
            if rows
            else np.zeros((0, 1), dtype=np.float32)
        )
        return np.asarray(rows, dtype=np.int64), matrix


def _keys(examples: Sequence[UsageExample]) -> list[tuple[str, str, int]]:
    """What tells two example lists apart (their vectors follow from their texts)."""
    return [(e.query, e.origin, e.at_ns) for e in examples]
