"""Keep the inferred part of a ``DependencyGraph`` up to date as sources come and go."""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping, Sequence

import numpy as np

from toolweave.inference.infer import infer_among
from toolweave.inference.producers import ToolProfile, profile
from toolweave.inference.universe import Universe
from toolweave.records import DependencyEdge, ToolRecord
from toolweave.registry.graph import DependencyGraph
from toolweave.registry.overrides import GraphOverrides, merge_inferred

__all__ = ["ProfileCache", "infer_for", "refresh_inferred_edges"]


class ProfileCache:
    """Tool profiles kept from one ingest to the next, by tool id and content hash.

    Inference reads every tool of the registry; at 100k tools, decoding the stored records and
    profiling them took longer than everything else an ingest does. With this cache an ingest profiles
    the tools it changed, and the rules' per-tool findings (``ToolProfile.memo``) stay with the profiles,
    as do the universe's groupings (``Universe.grouping``): only the changed tools' entries change.
    """

    def __init__(self) -> None:
        self._by_id: dict[str, tuple[str, ToolProfile]] = {}
        self._universe: Universe | None = None

    def universe(self, records: Mapping[str, ToolRecord], hashes: Mapping[str, str]) -> Universe:
        """Every tool's profile, in id order: the cached one while its content hash is the same, else
        ``records[id]`` (decoded only then) profiled anew. Tools no longer in ``hashes`` are forgotten."""
        by_id = self._by_id
        added: list[ToolProfile] = []
        removed: list[ToolProfile] = []
        for tool_id, content in hashes.items():
            cached = by_id.get(tool_id)
            if cached is not None and cached[0] == content:
                continue
            new = profile(records[tool_id])
            by_id[tool_id] = (content, new)
            added.append(new)
            if cached is not None:
                removed.append(cached[1])
        for tool_id in by_id.keys() - hashes.keys():
            removed.append(by_id.pop(tool_id)[1])
        last = self._universe
        if last is None or 2 * (len(added) + len(removed)) > len(by_id):
            # a first or a sweeping change: grouping everything afresh costs no more than updating
            profiles = [p for _hash, p in sorted(by_id.values(), key=lambda hp: hp[1].id)]
            self._universe = Universe(profiles)
        else:
            gone = {p.id for p in removed}
            # the kept tools are in order already: sorting merges the new ones in (Timsort finds the runs)
            profiles = sorted([p for p in last if p.id not in gone] + added, key=lambda p: p.id)
            self._universe = last.evolve(profiles, added, removed)
        return self._universe

    def universe_after(
        self,
        records: Mapping[str, ToolRecord],
        hashes: Mapping[str, str],
        changed: Sequence[ToolRecord],
        removed: Collection[str],
    ) -> Universe:
        """``universe`` as a write will leave the registry whose ``records`` and ``hashes`` are given,
        before it is written: ``changed`` replace or join them, ``removed`` leave (so the inference that
        runs beside the full-text index build reads neither the table nor the snapshot)."""
        after = {i: h for i, h in hashes.items() if i not in removed}
        after.update((t.id, t.content_hash) for t in changed)
        return self.universe(_Overlay({t.id: t for t in changed}, records), after)


class _Overlay(Mapping[str, ToolRecord]):
    """``top``'s records over ``rest``'s: the records in hand, the stored ones (decoded on access) below."""

    def __init__(self, top: Mapping[str, ToolRecord], rest: Mapping[str, ToolRecord]) -> None:
        self._top, self._rest = top, rest

    def __getitem__(self, tool_id: str) -> ToolRecord:
        found = self._top.get(tool_id)
        return self._rest[tool_id] if found is None else found

    def __iter__(self) -> Iterator[str]:
        return iter({**dict.fromkeys(self._rest), **dict.fromkeys(self._top)})

    def __len__(self) -> int:
        return len(self._rest.keys() | self._top.keys())


def infer_for(
    universe: Sequence[ToolProfile],
    vectors: Mapping[str, np.ndarray] | None,
    changed_ids: Collection[str],
    *,
    by_rules: Sequence[DependencyEdge] | None = None,
) -> list[DependencyEdge]:
    """The inferred edges from and to ``changed_ids``, from the profiles and vectors alone (no graph):
    what ``refresh_inferred_edges`` merges. An ingest runs it before it takes the writer lock, on the
    registry as its write will leave it, and hands the edges to ``refresh_inferred_edges``."""
    ids = {p.id for p in universe}
    changed = {i for i in changed_ids if i in ids}
    return infer_among(universe, changed, vectors=vectors, by_rules=by_rules) if changed else []


def refresh_inferred_edges(
    graph: DependencyGraph,
    universe: Sequence[ToolProfile],
    vectors: Mapping[str, np.ndarray] | None,
    changed_ids: Collection[str],
    *,
    overrides: GraphOverrides | None = None,
    by_rules: Sequence[DependencyEdge] | None = None,
    inferred: Sequence[DependencyEdge] | None = None,
) -> int:
    """Recompute the inferred edges from and to ``changed_ids``; returns how many inferred edges were added.

    Args:
        graph: the registry's graph; every tool of ``universe`` must already be a node.
        universe: the profiles of ALL tools now in the registry (new and old), in id order
            (``ProfileCache.universe``).
        vectors: their embeddings by id, or ``None`` (rules only).
        changed_ids: ids added or whose content changed in this ingest. Removed tools need nothing
            here: ``graph.remove_tools`` already dropped their edges.
        overrides: the manifest's corrections: ``remove`` entries keep matching edges out.
        by_rules: ``propose_by_rules(universe, changed_ids)``, when the caller ran the rules already.
        inferred: ``infer_for(universe, vectors, changed_ids)``, when the caller ran it already (then
            ``vectors`` and ``by_rules`` are not read).

    Edges among untouched tools stay as they are. Tools of a source that declares its own edges
    get no inferred outgoing edges (the source's author already said what they need), and a pair
    that holds a declared or manifest edge never gets an inferred one.
    """
    source_of = {p.id: p.source for p in universe}
    changed = {i for i in changed_ids if i in source_of}
    graph.remove_edges(
        lambda e: e.origin == "inferred" and (e.tool in changed or e.depends_on in changed), touching=changed
    )
    if not changed:
        return 0
    declaring = {source_of[t] for t in graph.declaring() if t in source_of}
    if inferred is None:
        inferred = infer_among(universe, changed, vectors=vectors, by_rules=by_rules)
    edges = [e for e in inferred if source_of[e.tool] not in declaring]
    return merge_inferred(graph, edges, overrides)
