"""What every inference rule is made of: ``Rule`` (a finder and its keys), ``Scope`` (an incremental
run's focus), ``EdgeText`` (how its edges read), and the helpers the rule families share.

Rules rely on naming conventions that hold across APIs (verb-object names, ``*_id`` / ``*_code``
identifiers, session and token parameters) and on generic vocabulary, never on tool names.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Hashable, Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TypeVar

from toolweave.inference.producers import ToolProfile
from toolweave.inference.text import singular, words, wordset
from toolweave.records import DependencyEdge, EdgeKind

__all__ = [
    "AUTH_PARAM_WORDS",
    "CHECK_VERBS",
    "DEFAULT",
    "DIRECT",
    "GOES_WITH",
    "NEEDS",
    "VAGUE",
    "EdgeText",
    "Finder",
    "Keys",
    "Ranked",
    "Rule",
    "Scope",
    "best_allowed",
    "best_candidate",
    "is_sibling",
    "keyed_params",
    "may_default",
    "param_keys",
    "param_words",
    "tool_key",
]

Finder = Callable[[Sequence[ToolProfile], Sequence[ToolProfile], "Scope | None"], Iterator[DependencyEdge]]
Keys = Callable[[ToolProfile], Collection[Hashable]]
_K = TypeVar("_K", bound=Hashable)


@dataclass(frozen=True)
class Scope:
    """What an incremental run of one rule wants: the edges with an end in ``focus``. ``offered`` holds
    the keys the focus's tools offer under the rule (``Rule.offers``). A subject outside the focus can
    link to a focus tool only through such a key (the rule's cover), so a finder may skip the subject's
    other keys: at 100k tools, reached tools' other parameters were most of an ingest's rule work, and
    every edge they gave was dropped."""

    focus: Collection[str]
    offered: Collection[Hashable]

    def wants(self, t: ToolProfile, key: Hashable) -> bool:
        return t.id in self.focus or key in self.offered

    def among(self, candidates: Sequence[ToolProfile]) -> list[ToolProfile]:
        """The candidates in the focus."""
        return [p for p in candidates if p.id in self.focus]

    def reaches(
        self, t: ToolProfile, focus_candidates: Sequence[ToolProfile], allowed: Callable[[ToolProfile], bool]
    ) -> bool:
        """Whether ``t``'s best candidate can be in the focus, if ``t`` is not: then some candidate of
        the focus must be allowed. Asking the few focus candidates first spares ranking them all for
        the many tools an ingest reaches that keep their old producer."""
        return t.id in self.focus or any(allowed(p) for p in focus_candidates)

    def keeps(self, t: ToolProfile, p: ToolProfile) -> bool:
        """Whether an edge ``t -> p`` is wanted (has an end in the focus): a finder need not build the
        others."""
        return t.id in self.focus or p.id in self.focus


@dataclass(frozen=True)
class Rule:
    """An inference rule: ``rule(subjects, universe)`` yields edges out of each subject, to any tool of
    the universe; a subject's edges depend on the subject and the universe, never on the other subjects.

    ``wants(t)`` and ``offers(p)`` are keys such that the rule links ``t`` to ``p`` only if they share
    one (a cover: sharing a key does not make an edge). An incremental ingest runs the rule for the
    changed tools and for the tools that want what a changed tool offers, not for every tool, and gets
    the same edges touching the change (``infer.infer_among``). Wanted keys are kept on the profile.
    Both, like every key function the finders group the universe by (``universe.group_by``), depend on
    the profile alone: a ``Universe`` carries those groupings from one ingest to the next.
    """

    name: str
    find: Finder
    wants: Keys
    offers: Keys

    def __call__(
        self, subjects: Sequence[ToolProfile], universe: Sequence[ToolProfile], scope: Scope | None = None
    ) -> Iterator[DependencyEdge]:
        """Edges out of ``subjects``; with ``scope``, at least every one with an end in its focus."""
        return self.find(subjects, universe, scope)

    def wanted(self, t: ToolProfile) -> frozenset[Hashable]:
        return t.memo(("wants", self.name), self._wanted)

    def _wanted(self, t: ToolProfile) -> frozenset[Hashable]:
        return frozenset(self.wants(t))


@dataclass(frozen=True)
class EdgeText:
    """How a rule's edges read: the rule (the calibration key of ``calibration.RULE_CONFIDENCE``), their
    kind, and ``str.format`` templates of the reason and evidence over ``param``, ``p`` (the id of the
    tool depended on) and the facts the rule passes."""

    rule: str
    kind: EdgeKind
    reason: str
    evidence: str

    def edge(
        self, t: ToolProfile, p: ToolProfile, param: str | None = None, *, variant: str = "", **facts: object
    ) -> DependencyEdge:
        """``t`` depends on ``p``; ``variant`` (``/core``) names a rule calibrated apart. The confidence is
        set from the calibration table afterwards."""
        values = {"param": param, "p": p.id, **facts}
        return DependencyEdge(
            tool=t.id,
            depends_on=p.id,
            kind=self.kind,
            parameter_name=param,
            reason=self.reason.format(**values),
            origin="inferred",
            confidence=0.0,
            evidence=f"{self.rule}{variant}: {self.evidence.format(**values)}",
        )


DIRECT = EdgeKind.PARAMETER_DIRECTLY_DEPENDS_ON
DEFAULT = EdgeKind.PARAMETER_INDIRECTLY_DEPENDS_ON
NEEDS = EdgeKind.TOOL_DIRECTLY_DEPENDS_ON
GOES_WITH = EdgeKind.TOOL_INDIRECTLY_DEPENDS_ON

# Parameter names too vague to say what produced them.
VAGUE = wordset(
    "name id type value data query text content message result status on off level mode amount count "
    "number title description category url key format limit page size keyword keywords input output "
    "option options flag enabled confirmation notes note reason comment"
)
CHECK_VERBS = frozenset(("check", "validate", "verify"))
AUTH_PARAM_WORDS = wordset("session sessionid token jwt bearer")


@lru_cache(maxsize=65536)
def param_words(param: str) -> tuple[str, ...]:
    return tuple({"identifier": "id", "ids": "id", "uuid": "id"}.get(w, singular(w)) for w in words(param))


def best_candidate(t: ToolProfile, cands: Sequence[tuple[float, ToolProfile]]) -> ToolProfile | None:
    """Highest score; ties broken toward the same source, core tools, fewer inputs, then id (stable)."""
    if not cands:
        return None
    ranked = sorted(
        cands,
        key=lambda sp: (
            -sp[0],
            sp[1].source != t.source,
            sp[1].kind != "core",
            len(sp[1].required),
            sp[1].id,
        ),
    )
    return ranked[0][1]


@dataclass(frozen=True)
class Ranked:
    """Candidates in ``best_candidate`` order with the subject left out: by score, then core first,
    fewer inputs, id; and the same per source. ``best`` then finds a subject's best candidate at the
    front instead of scoring every candidate for every subject (at 100k tools one phrase can have
    thousands of producers). Only for scores that do not depend on the subject."""

    tiers: tuple[tuple[list[ToolProfile], dict[str, list[ToolProfile]]], ...]

    @classmethod
    def of(cls, cands: Sequence[ToolProfile], score: Callable[[ToolProfile], float]) -> Ranked:
        by_score: dict[float, list[ToolProfile]] = {}
        for p in sorted(cands, key=lambda p: (p.kind != "core", len(p.required), p.id)):
            by_score.setdefault(score(p), []).append(p)
        tiers = []
        for _score, tier in sorted(by_score.items(), key=lambda item: -item[0]):
            by_source: dict[str, list[ToolProfile]] = {}
            for p in tier:
                by_source.setdefault(p.source, []).append(p)
            tiers.append((tier, by_source))
        return cls(tuple(tiers))

    def best(self, t: ToolProfile, allowed: Callable[[ToolProfile], bool]) -> ToolProfile | None:
        """What ``best_candidate(t, [(score, p) for allowed p])`` gives, without scoring them all."""
        return next(self.first(t, allowed), None)

    def first(self, t: ToolProfile, allowed: Callable[[ToolProfile], bool]) -> Iterator[ToolProfile]:
        """The allowed candidates in ``best_candidate`` order (a caller that wants a few stops early)."""
        for tier, by_source in self.tiers:
            own = by_source.get(t.source, ())
            yield from (p for p in own if allowed(p))  # same source first, as in best_candidate
            yield from (p for p in tier if p.source != t.source and allowed(p))


def is_sibling(t: ToolProfile, p: ToolProfile) -> bool:
    """``p`` takes the same key inputs as ``t``: another operation on the same record, not its source."""
    # all(... in tuple) rather than set <= set: these tuples hold a few words, and the identity rule asks
    # this hundreds of thousands of times per ingest at 100k tools (building the sets was most of its time)
    if p.required and all(r in t.params for r in p.required):
        return True
    # reading and writing one resource (query_x / record_x) are siblings: the reader does not feed the writer
    return bool(p.subject_words) and all(w in t.name_words for w in p.subject_words)


def may_default(t: ToolProfile, param: str, p: ToolProfile) -> bool:
    """Can context tool ``p`` supply a default for ``param``?

    A source that marks tools as ``core`` tells us those are context suppliers: trust it for any
    parameter. Otherwise a default only makes sense for a parameter the caller may leave out.
    """
    return p.kind == "core" or param not in t.required


def best_allowed(
    t: ToolProfile, cands: Sequence[tuple[float, ToolProfile]], scope: Scope | None
) -> ToolProfile | None:
    """``best_candidate``, when the edge to it is wanted (``Scope.keeps``): a run focused on an
    ingest's tools need not build the edges of the tools it reached that keep their old choice."""
    best = best_candidate(t, cands)
    return best if best is not None and (scope is None or scope.keeps(t, best)) else None


def param_keys(t: ToolProfile, key: Callable[[tuple[str, ...]], Hashable | None]) -> set[Hashable]:
    """``key`` of each parameter's words, without ``None``: what a per-parameter rule looks for."""
    found = {key(pw) for pw in map(param_words, t.params) if pw}
    found.discard(None)
    return found


def tool_key(value: Hashable, holds: bool) -> tuple[Hashable, ...]:
    return (value,) if holds else ()


def keyed_params(
    subjects: Sequence[ToolProfile], key: Callable[[tuple[str, ...]], _K | None], scope: Scope | None
) -> Iterator[tuple[ToolProfile, str, tuple[str, ...], _K]]:
    """``(subject, parameter, its words, key)`` for each parameter whose words have a key (and, with a
    ``scope``, can link to its focus: the rules that use this look candidates up by that key)."""
    for t in subjects:
        for param in t.params:
            pw = param_words(param)
            found = key(pw)
            if found is not None and (scope is None or scope.wants(t, found)):
                yield t, param, pw, found
