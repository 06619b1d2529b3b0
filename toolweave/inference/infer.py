"""Orchestration: run the rules (and the optional similarity pass) and keep one edge per pair.

``infer_edges`` is pure: tool records (and optional vectors) in, edges out. It never sees declared
edges, ``depends_on`` fields or queries; ``ToolRecord`` has no field for any of them.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence

import numpy as np

from toolweave.inference.calibration import NO_EVIDENCE, RULE_CONFIDENCE
from toolweave.inference.producers import ToolProfile, profile
from toolweave.inference.rules import RULES, Rule, Scope
from toolweave.inference.similarity import similarity_edges
from toolweave.inference.universe import group_by, in_order
from toolweave.records import DependencyEdge, EdgeKind, ToolRecord

__all__ = [
    "infer_among",
    "infer_edges",
    "propose_by_rules",
    "propose_edges",
    "rule_of",
    "walkable",
    "weighed",
]


def infer_edges(
    tools: Sequence[ToolRecord],
    *,
    vectors: Mapping[str, np.ndarray] | None = None,
    only_for: Collection[str] | None = None,
    known: Sequence[ToolRecord] = (),
    confidence: Mapping[str, float] | None = None,
) -> list[DependencyEdge]:
    """Propose typed dependency edges (``origin="inferred"``) among ``tools`` and ``known``.

    Args:
        tools: the tools to infer edges for (e.g. the sources being ingested).
        vectors: optional unit embedding per tool id (``tool_document`` text); enables the
            similarity pass for tools that have one. Without it only the rules run.
        only_for: ids whose outgoing AND incoming edges are (re)computed; every returned edge has
            at least one end in it. ``None`` means every id of ``tools``. Incremental ingest passes
            the new or changed ids: edges among untouched tools are neither returned nor changed.
        known: tools already in the registry; they can be either end of an edge but, unless named
            in ``only_for``, edges between two of them are not returned.
        confidence: each rule's calibrated confidence (default ``RULE_CONFIDENCE``); benchmarks pass
            leave-one-dataset-out values. Every edge of a rule gets its rule's confidence.

    Returns:
        Edges grouped by tool, each tool's most confident first (the order a dependency walk
        follows); at most one per (tool, depends_on) pair: the most
        confident, with the parameter names of same-kind edges merged (``"start_year,end_year"``).
        Deterministic: the same input gives the same list.
    """
    by_id: dict[str, ToolRecord] = {t.id: t for t in known}
    by_id.update({t.id: t for t in tools})
    focus = set(only_for) if only_for is not None else {t.id for t in tools}
    if not focus & by_id.keys():
        return []
    universe = [profile(by_id[i]) for i in sorted(by_id)]
    return infer_among(universe, focus, vectors=vectors, confidence=confidence)


def infer_among(
    universe: Sequence[ToolProfile],
    focus: Collection[str],
    *,
    vectors: Mapping[str, np.ndarray] | None = None,
    confidence: Mapping[str, float] | None = None,
    by_rules: Sequence[DependencyEdge] | None = None,
) -> list[DependencyEdge]:
    """``infer_edges`` over profiles: the edges with an end in ``focus`` among the ``universe``'s tools
    (in id order). An ingest keeps the profiles of unchanged tools (``ProfileCache``), and each rule runs
    only for the focus and the tools that want what the focus offers (``Rule.wants``): the cost follows
    the change, not the registry, and the edges are the same as over every tool.

    ``by_rules``: what ``propose_by_rules`` gave for this universe and focus (an ingest runs the rules
    beside its full-text index build; only the similarity pass needs the vectors)."""
    focus = {p.id for p in universe if p.id in focus}
    if not focus:
        return []
    raw = _propose(universe, vectors, confidence, focus, by_rules)
    kept = [e for e in raw if e.tool != e.depends_on and (e.tool in focus or e.depends_on in focus)]
    return _one_per_pair(kept)


def propose_edges(
    tools: Sequence[ToolRecord],
    *,
    vectors: Mapping[str, np.ndarray] | None = None,
    confidence: Mapping[str, float] | None = None,
    focus: Collection[str] | None = None,
) -> list[DependencyEdge]:
    """Every rule's proposals among ``tools``, before one edge per pair is chosen (for calibration:
    each edge's evidence names its rule, see ``rule_of``). With ``focus``, the proposals with an end in
    it."""
    return _propose([profile(t) for t in tools], vectors, confidence, focus)


def propose_by_rules(
    universe: Sequence[ToolProfile], focus: Collection[str], *, confidence: Mapping[str, float] | None = None
) -> list[DependencyEdge]:
    """The rules' proposals with an end in ``focus`` (no similarity pass: it needs vectors), to hand to
    ``infer_among(..., by_rules=)`` for the same universe and focus."""
    focus = {p.id for p in universe if p.id in focus}
    return _by_rules(universe, confidence, focus) if focus else []


def _propose(
    universe: Sequence[ToolProfile],
    vectors: Mapping[str, np.ndarray] | None,
    confidence: Mapping[str, float] | None,
    focus: Collection[str] | None,
    by_rules: Sequence[DependencyEdge] | None = None,
) -> list[DependencyEdge]:
    table = RULE_CONFIDENCE if confidence is None else confidence
    raw = list(by_rules) if by_rules is not None else _by_rules(universe, confidence, focus)
    if vectors:
        already = {(e.tool, e.depends_on) for e in raw}
        similar = similarity_edges(universe, vectors, already=already, focus=focus)
        raw.extend(_calibrated(similar, table))
    return raw


def _by_rules(
    universe: Sequence[ToolProfile], confidence: Mapping[str, float] | None, focus: Collection[str] | None
) -> list[DependencyEdge]:
    table = RULE_CONFIDENCE if confidence is None else confidence
    changed = in_order(universe, focus) if focus is not None else []
    raw: list[DependencyEdge] = []
    for rule in RULES:
        if focus is None:
            found = rule(universe, universe)
        else:
            scope = Scope(focus, {key for p in changed for key in rule.offers(p)})
            found = rule(_reaching(rule, universe, scope, changed), universe, scope)
            # a reached tool's edge to a tool outside the change is not wanted
            found = (e for e in found if e.tool in focus or e.depends_on in focus)
        raw.extend(_calibrated(found, table))
    return raw


def _reaching(
    rule: Rule, universe: Sequence[ToolProfile], scope: Scope, changed: Sequence[ToolProfile]
) -> Sequence[ToolProfile]:
    """The subjects whose edges under ``rule`` can touch the focus: the changed tools, and the tools that
    want a key a changed tool offers (in universe order, as a full run visits them)."""
    if not scope.offered:
        return changed
    wanting = group_by(universe, rule.wants)  # kept across ingests by a ``Universe``
    reached = set(scope.focus)
    for key in scope.offered:
        reached.update(t.id for t in wanting.get(key, ()))
    return in_order(universe, reached)


def rule_of(edge: DependencyEdge) -> str:
    """The rule that proposed an inferred edge (its evidence starts with the rule's name)."""
    return edge.evidence.split(":", 1)[0]


def _calibrated(edges: Iterable[DependencyEdge], table: Mapping[str, float]) -> Iterator[DependencyEdge]:
    # one confidence per rule: what its edges were worth on gold graphs, not what the rule hopes
    for e in edges:
        yield e.model_copy(update={"confidence": table.get(rule_of(e), NO_EVIDENCE)})


def _one_per_pair(edges: Sequence[DependencyEdge]) -> list[DependencyEdge]:
    best: dict[tuple[str, str], DependencyEdge] = {}
    for e in edges:
        pair = (e.tool, e.depends_on)
        cur = best.get(pair)
        if cur is None:
            best[pair] = e
        elif (
            cur.kind == e.kind
            and e.parameter_name
            and cur.parameter_name
            and e.parameter_name not in (cur.parameter_name.split(","))
        ):
            best[pair] = cur.model_copy(
                update={
                    "parameter_name": f"{cur.parameter_name},{e.parameter_name}",
                    "confidence": max(cur.confidence, e.confidence),
                }
            )
        elif e.confidence > cur.confidence:
            best[pair] = e
    # A 2-cycle of "needs" edges is a contradiction (except read/change pairs of one state, which are
    # indirect both ways): keep the more confident direction.
    for a, b in list(best):
        forth, back = best.get((a, b)), best.get((b, a))
        if forth is None or back is None or EdgeKind.TOOL_INDIRECTLY_DEPENDS_ON in (forth.kind, back.kind):
            continue
        loser = (b, a) if (forth.confidence, b) >= (back.confidence, a) else (a, b)
        del best[loser]
    # a tool's edges come most confident first: retrieval walks dependencies in this order
    return sorted(best.values(), key=lambda e: (e.tool, -e.confidence, e.depends_on))


_GUESSED = frozenset({"inferred", "learned"})
"""Origins whose confidence decides whether the walk follows them (learned: not yet sure enough)."""


def walkable(edges: Iterable[DependencyEdge], min_confidence: float) -> list[DependencyEdge]:
    """The edges retrieval may walk: declared and manifest ones, and inferred (calibrated) or learned
    (from traffic) ones whose confidence reaches ``min_confidence`` (``Settings.infer_min_confidence``).
    The others stay in the graph for ``toolweave graph`` and for a person to confirm, but a wrong guess
    never moves a tool into a ranked list."""
    return [e for e in edges if e.origin not in _GUESSED or e.confidence >= min_confidence]


def weighed(edges: Iterable[DependencyEdge], min_confidence: float) -> list[DependencyEdge]:
    """The edges the retrieval walk is given: ``walkable`` ones and inferred ones of any confidence. The
    walk weighs an inferred edge by its calibrated confidence (``retrieval.walk``: its dependency weighs
    the parent's relevance × the confidence and needs ``WalkPolicy.inferred_min_weight``), so a guess of a
    rule no second gold source confirmed (1/3) is walked only from a clear hit, and placed after the hits
    that stand above it, instead of never (bench/RESULTS.md, "Prerequisites without traffic")."""
    return [
        e
        for e in edges
        if e.origin == "inferred" or e.origin not in _GUESSED or e.confidence >= min_confidence
    ]
