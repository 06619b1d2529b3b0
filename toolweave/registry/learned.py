"""The learned-edge book: traffic evidence in the ``traffic`` table, and the edges it makes.

The gateway's observer (``toolweave.server.calls.traffic``) reports sightings
(``toolweave.registry.evidence``); ``record`` buffers them in ``Observations`` like a usage example, and the
``Flusher`` hands each batch back here (the book is its second ``Sink``): merged into the evidence rows as
the registry now is (the flush caught up with other replicas' commits under the writer lease, so their
batches add up), written to the ``traffic`` table, and turned into edges of origin ``learned`` in the graph,
all in the flush's one commit. Nothing here runs per call.

A learned edge is ``consumer ← producer``: ``PARAMETER_DIRECTLY_DEPENDS_ON`` with the parameter for value
flow, ``TOOL_DIRECTLY_DEPENDS_ON`` for sequence evidence, confidence ``Evidence.edge_confidence``. Only
rows of two sessions or more become edges (one session never does); those below
``Settings.infer_min_confidence`` stay in the graph unwalked, like weak inferred edges. The manifest
wins: a pair a declared or manifest edge holds gets no learned edge, and ``dependencies.remove`` keeps
one out however often traffic sees it. Rows naming a private tool are dropped at the next flush (the
observer sees none after ``set_private``).

``next_steps(tool)`` answers the gateway's after-call publishing: the tools seen called right after
``tool`` in two sessions or more, most confident first (``Evidence.next_step_confidence``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from toolweave.records import DependencyEdge, EdgeKind
from toolweave.registry.evidence import (
    Evidence,
    EvidenceKey,
    Sighting,
    Sketch,
    abstract_path,
    field_name,
    merge_sightings,
)
from toolweave.registry.observations import Batch, Observations
from toolweave.registry.overrides import held
from toolweave.registry.state import RegistryState

__all__ = ["LearnedEdgeBook", "NextStep", "edge_evidence", "learned_edge"]

log = logging.getLogger(__name__)

NextStep = tuple[str, float, EdgeKind]
"""(consumer, next-step confidence, the kind of the learned edge behind it)."""
NextSteps = dict[str, tuple[NextStep, ...]]
"""Producer → its likely next tools, most confident first."""


class LearnedEdgeBook:
    """The evidence rows by key, and the next steps they support; the ``Sink`` of buffered sightings."""

    def __init__(
        self, state: RegistryState, observations: Observations, is_private: Callable[[str], bool]
    ) -> None:
        self._state = state
        self._observations = observations
        self._is_private = is_private
        self.rows: dict[EvidenceKey, Evidence] = {}
        self._next: NextSteps = {}
        self._pending: tuple[dict[EvidenceKey, Evidence], NextSteps] | None = None

    def load(self) -> None:
        """The committed evidence (the follower calls it once the graph is loaded)."""
        self.rows = {e.key: e for e in (_evidence(row) for row in self._state.db.side.load_traffic())}
        self._next = self._next_steps(self.rows)

    def view_changed(self) -> None:
        """The gateway's manifest changed: next steps as its view now shows the learned edges."""
        self._next = self._next_steps(self.rows)

    # -- the call path ---------------------------------------------------------------------------------
    def record(self, sightings: Sequence[Sighting]) -> int:
        """Buffer the sightings about known, non-private tools (an append in memory); returns how many."""
        kept = [s for s in sightings if self._observable(s.consumer, s.producer)]
        return self._observations.add_sightings(kept) if kept else 0

    def _observable(self, consumer: str, producer: str) -> bool:
        """Both tools (one, for a call count) exist and neither is private."""
        known = self._state.snap.records
        return all(t in known and not self._is_private(t) for t in (consumer, producer) if t)

    def next_steps(self, tool_id: str) -> tuple[NextStep, ...]:
        """The tools seen called right after ``tool_id`` (value flowing or not), most confident first."""
        return self._next.get(tool_id, ())

    # -- the flush (``observations.Sink``) -------------------------------------------------------------
    def prepare(self, batch: Batch) -> None:
        """Nothing to embed."""

    def write(self, batch: Batch) -> bool:
        """Merge the batch into the rows (as the registry now is), write the table, and bring the graph's
        learned edges in line; the edge table too when they changed. True when something was written."""
        if not batch.sightings:
            return False
        state = self._state
        rows = dict(self.rows)
        for key in {s.key for s in batch.sightings} & rows.keys():
            rows[key] = replace(rows[key])  # copies: the current rows stay as they are until swapped in
        merge_sightings(rows, [s for s in batch.sightings if self._observable(s.consumer, s.producer)])
        for key in [k for k in rows if not self._observable(k[0], k[2])]:
            del rows[key]  # a tool gone or made private since
        state.db.side.save_traffic([_row(e) for e in rows.values()])
        state.changes.touch_all("traffic")  # followers read the evidence again (it is small)
        edges = self._edges(rows)
        if self._sync_graph(edges):
            state.db.side.save_edges(state.graph.edges())
            state.changes.touch_some("edges", state.graph.peek_changed())
        self._pending = (rows, self._next_steps(rows, edges))
        return True

    def swap_in(self) -> None:
        """After the commit: the new rows and next steps, and the graph searches read."""
        with self._state.write_lock:  # the flusher swaps in after the commit, outside its write
            if self._pending is not None:
                self.rows, self._next = self._pending
                self._pending = None
            self._state.swap_in_graph()

    # -- edges --------------------------------------------------------------------------------------------
    def _edges(self, rows: dict[EvidenceKey, Evidence]) -> list[DependencyEdge]:
        """The learned edges ``rows`` make, minus those on a pair a declared edge holds (what a manifest
        says is applied in its own gateway's view, not in the shared graph)."""
        graph = self._state.graph
        out = []
        for row, confidence in edge_evidence(rows):
            if row.consumer not in graph or row.producer not in graph:
                continue
            edge = learned_edge(row, confidence)
            if held(graph, edge.tool, edge.depends_on):
                continue
            out.append(edge)
        return out

    def _sync_graph(self, edges: list[DependencyEdge]) -> bool:
        """Make ``edges`` the graph's learned edges; False when they already are."""
        graph = self._state.graph
        current = [e for e in graph.edges() if e.origin == "learned"]
        if set(current) == set(edges):
            return False
        touching = {e.tool for e in current} | {e.tool for e in edges}
        graph.remove_edges(lambda e: e.origin == "learned", touching=touching)
        problems = graph.add_edges(edges)  # a learned edge replaces an inferred one of the same key
        if problems:  # _edges checked both ends: a bug, not bad input
            log.warning("learned edges naming unknown tools skipped: %s", problems[0])
        return True

    def _next_steps(
        self, rows: dict[EvidenceKey, Evidence], edges: Iterable[DependencyEdge] | None = None
    ) -> NextSteps:
        """Producer → its likely next tools, over the rows whose edge is in the graph (or ``edges``) and
        in this gateway's view of it (a manifest ``remove`` hides one)."""
        if edges is None:
            edges = (e for e in self._state.graph.edges() if e.origin == "learned")
        calls = _sessions_per_tool(rows)
        best: dict[str, dict[str, NextStep]] = {}
        view = self._state.view
        for e in edges:
            if not view.keeps(e):
                continue
            row = rows.get((e.tool, e.parameter_name or "", e.depends_on))
            score = row.next_step_confidence(calls.get(e.depends_on, 0)) if row is not None else 0.0
            after = best.setdefault(e.depends_on, {})
            if score > 0 and score > after.get(e.tool, ("", 0.0, e.kind))[1]:
                after[e.tool] = (e.tool, score, e.kind)
        return {
            producer: tuple(sorted(after.values(), key=lambda step: (-step[1], step[0])))
            for producer, after in best.items()
            if after
        }


def edge_evidence(rows: dict[EvidenceKey, Evidence]) -> Iterator[tuple[Evidence, float]]:
    """The rows that make an edge (two sessions or more, not a tool feeding itself), with its confidence."""
    calls = _sessions_per_tool(rows)
    for row in rows.values():
        if row.is_call_count or row.consumer == row.producer:
            continue
        confidence = row.edge_confidence(calls.get(row.consumer, 0))
        if confidence > 0:
            yield row, confidence


def _sessions_per_tool(rows: dict[EvidenceKey, Evidence]) -> dict[str, int]:
    """Tool → the sessions it was called in (its call-count row)."""
    return {row.consumer: row.sessions.count() for row in rows.values() if row.is_call_count}


def learned_edge(row: Evidence, confidence: float) -> DependencyEdge:
    """The edge an evidence row makes (value flow: a parameter edge; sequence: a tool edge)."""
    sessions = row.sessions.count()
    first, last = _day(row.first_ns), _day(row.last_ns)
    how = "no value flowed" if row.is_sequence else f"specificity {row.specificity:.2f}"
    counts = (
        f"traffic: {row.sightings} sightings in {sessions} sessions, {row.adjacent.count()} of them right "
        f"after it; {how}; first seen {first}, last seen {last}"
    )
    if row.is_sequence:
        return DependencyEdge(
            tool=row.consumer,
            depends_on=row.producer,
            kind=EdgeKind.TOOL_DIRECTLY_DEPENDS_ON,
            reason=f"learned from {sessions} sessions: {row.consumer} was called right after "
            f"{row.producer} in the same turn",
            origin="learned",
            confidence=confidence,
            evidence=counts,
        )
    field = abstract_path(row.field)
    taken = f"{row.producer}'s {field}" if field else f"{row.producer}'s result"
    return DependencyEdge(
        tool=row.consumer,
        depends_on=row.producer,
        kind=EdgeKind.PARAMETER_DIRECTLY_DEPENDS_ON,
        parameter_name=row.parameter,
        reason=f"learned from {sessions} sessions: {row.consumer}.{row.parameter} took {taken}",
        origin="learned",
        confidence=confidence,
        evidence=counts,
    )


def _day(ns: int) -> str:
    return datetime.fromtimestamp(ns / 1e9, UTC).strftime("%Y-%m-%d") if ns else "?"


def _row(e: Evidence) -> dict[str, Any]:
    return {
        "consumer": e.consumer,
        "parameter": field_name(e.parameter) if e.parameter else "",
        "producer": e.producer,
        "field": abstract_path(e.field),
        "sightings": e.sightings,
        "sessions": list(e.sessions.hashes),
        "adjacent": list(e.adjacent.hashes),
        "specificity_sum": e.specificity_sum,
        "first_ns": e.first_ns,
        "last_ns": e.last_ns,
    }


def _evidence(row: dict[str, Any]) -> Evidence:
    return Evidence(
        consumer=row["consumer"],
        parameter=field_name(row["parameter"]) if row["parameter"] else "",
        producer=row["producer"],
        field=abstract_path(row["field"] or ""),
        sightings=int(row["sightings"] or 0),
        sessions=Sketch(tuple(row["sessions"] or ())),
        adjacent=Sketch(tuple(row["adjacent"] or ())),
        specificity_sum=float(row["specificity_sum"] or 0.0),
        first_ns=int(row["first_ns"] or 0),
        last_ns=int(row["last_ns"] or 0),
    )
