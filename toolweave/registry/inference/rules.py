"""Precision-first inference rules over ``ToolProfile``s.

Each rule is a generator of ``DependencyEdge``s with ``origin="inferred"``, a ``reason`` a person can
read, the ``evidence`` (which words matched) and a ``confidence`` in [0, 1]. Rules rely on naming
conventions that hold across APIs (verb-object names, ``*_id`` / ``*_code`` identifiers, session and
token parameters, ``validate_*`` tools, ``get_*_status`` readers) and on generic vocabulary (value
families such as dates and locations, measurement units, connectivity words), never on tool names.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Hashable, Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache, partial
from itertools import chain
from typing import TypeVar

from toolweave.records import DependencyEdge, EdgeKind
from toolweave.registry.inference.producers import ToolProfile, param_family
from toolweave.registry.inference.text import singular, words, wordset
from toolweave.registry.inference.universe import group_by

__all__ = [
    "FLEET_PRIOR_SHARE",
    "RULES",
    "UNIT_WORDS",
    "EdgeText",
    "Rule",
    "Scope",
    "best_candidate",
    "is_sibling",
    "param_words",
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


_DIRECT = EdgeKind.PARAMETER_DIRECTLY_DEPENDS_ON
_DEFAULT = EdgeKind.PARAMETER_INDIRECTLY_DEPENDS_ON
_NEEDS = EdgeKind.TOOL_DIRECTLY_DEPENDS_ON
_GOES_WITH = EdgeKind.TOOL_INDIRECTLY_DEPENDS_ON

# Parameter names too vague to say what produced them.
_VAGUE = wordset(
    "name id type value data query text content message result status on off level mode amount count "
    "number title description category url key format limit page size keyword keywords input output "
    "option options flag enabled confirmation notes note reason comment"
)
_CHECK_VERBS = frozenset(("check", "validate", "verify"))
_AUTH_PARAM_WORDS = wordset("session sessionid token jwt bearer")
UNIT_WORDS = wordset(
    "kg kgs g gram grams lb lbs pound pounds oz ounce ounces m cm mm km meter meters metre metres mi mile "
    "miles ft feet foot inch inches yd celsius fahrenheit kelvin c f ml l liter liters litre litres gal "
    "gallon gallons mph kph kmh"
)
_CONNECTIVITY_WORDS = wordset("wifi internet network connectivity online connection")
# What a tool's own text says when it needs the network: generic web vocabulary, and the acts of an
# online service (book, order, send an email, post, subscribe). No subject of any fleet.
_NETWORK_WORDS = wordset(
    "network internet online web website cloud server remote url http https download upload stream "
    "streaming sync wifi connection connectivity account accounts book booking order orders purchase buy "
    "sell reserve reservation email emails send post share subscription portal marketplace platform"
)
FLEET_PRIOR_SHARE = 0.5
"""A fleet-wide prior ("these tools need the network") holds only when more than this share of the
fleet's tools say so in their own text."""


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
class _Ranked:
    """Candidates in ``best_candidate`` order with the subject left out: by score, then core first,
    fewer inputs, id; and the same per source. ``best`` then finds a subject's best candidate at the
    front instead of scoring every candidate for every subject (at 100k tools one phrase can have
    thousands of producers). Only for scores that do not depend on the subject."""

    tiers: tuple[tuple[list[ToolProfile], dict[str, list[ToolProfile]]], ...]

    @classmethod
    def of(cls, cands: Sequence[ToolProfile], score: Callable[[ToolProfile], float]) -> _Ranked:
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
        for tier, by_source in self.tiers:
            for p in chain(by_source.get(t.source, ()), tier):  # same source first, as in best_candidate
                if allowed(p):
                    return p
        return None


def is_sibling(t: ToolProfile, p: ToolProfile) -> bool:
    """``p`` takes the same key inputs as ``t``: another operation on the same record, not its source."""
    # all(... in tuple) rather than set <= set: these tuples hold a few words, and the identity rule asks
    # this hundreds of thousands of times per ingest at 100k tools (building the sets was most of its time)
    if p.required and all(r in t.params for r in p.required):
        return True
    # reading and writing one resource (query_x / record_x) are siblings: the reader does not feed the writer
    return bool(p.subject_words) and all(w in t.name_words for w in p.subject_words)


def _may_default(t: ToolProfile, param: str, p: ToolProfile) -> bool:
    """Can context tool ``p`` supply a default for ``param``?

    A source that marks tools as ``core`` tells us those are context suppliers: trust it for any
    parameter. Otherwise a default only makes sense for a parameter the caller may leave out.
    """
    return p.kind == "core" or param not in t.required


def _best(
    t: ToolProfile, cands: Sequence[tuple[float, ToolProfile]], scope: Scope | None
) -> ToolProfile | None:
    """``best_candidate``, when the edge to it is wanted (``Scope.keeps``): a run focused on an
    ingest's tools need not build the edges of the tools it reached that keep their old choice."""
    best = best_candidate(t, cands)
    return best if best is not None and (scope is None or scope.keeps(t, best)) else None


def _param_keys(t: ToolProfile, key: Callable[[tuple[str, ...]], Hashable | None]) -> set[Hashable]:
    """``key`` of each parameter's words, without ``None``: what a per-parameter rule looks for."""
    found = {key(pw) for pw in map(param_words, t.params) if pw}
    found.discard(None)
    return found


def _tool_key(value: Hashable, holds: bool) -> tuple[Hashable, ...]:
    return (value,) if holds else ()


def _keyed_params(
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


# -- authentication ------------------------------------------------------------------------------------
def _is_credential(pw: tuple[str, ...]) -> bool:
    """The value is a credential (session_id, access_token), not about a session (session_date)."""
    return bool(pw) and (pw[-1] in _AUTH_PARAM_WORDS or (pw[-1] in ("id", "key") and "session" in pw))


def _credential(pw: tuple[str, ...]) -> str | None:
    return "credential" if _is_credential(pw) else None


def _offers_credentials(p: ToolProfile) -> tuple[Hashable, ...]:
    return _tool_key("credential", _is_auth_producer(p))


def _is_auth_producer(p: ToolProfile) -> bool:
    return (
        p.is_auth
        or any(w in _AUTH_PARAM_WORDS for w in p.outputs)
        or (
            p.verb in ("get", "generate", "obtain", "request", "issue", "create")
            and "token" in p.object_words
        )
    )


def _auth(
    subjects: Sequence[ToolProfile], universe: Sequence[ToolProfile], scope: Scope | None = None
) -> Iterator[DependencyEdge]:
    """``session_id`` / ``token`` inputs come from the login (or token) tool of the same service."""
    producers = group_by(universe, _offers_credentials).get("credential", [])
    for t, param, pw, _credential_key in _keyed_params(subjects, _credential, scope):
        pname = "_".join(pw)
        scored: list[tuple[float, ToolProfile]] = []
        for p in producers:
            if p.id == t.id or param in p.params or (p.source != t.source and not p.outputs):
                continue
            overlap = len(p.service_words & set(t.name_words))
            exact = pname in p.outputs or pw[-1] in p.outputs
            named = bool(set(pw) & set(p.name_words))
            if p.service_words and not overlap and not exact:
                continue  # another service's login
            score = 3.0 * exact + 2.0 * overlap + 1.0 * p.is_auth + 1.0 * named + 0.5 * (p.source == t.source)
            scored.append((score, p))
        best = _best(t, scored, scope)
        if best is None:
            continue
        why = f"input {param!r}; " + (
            f"{best.id} outputs {sorted(best.outputs & {pname, pw[-1]})}"
            if best.outputs & {pname, pw[-1]}
            else f"{best.id} is an authentication tool"
        )
        shared = sorted(best.service_words & set(t.name_words))
        if shared:
            why += f"; same service {shared}"
        yield _AUTH.edge(t, best, param, why=why)


_AUTH = EdgeText("auth_rule", _DIRECT, "{param} is issued by authenticating with {p}", "{why}")
auth_rule = Rule(
    "auth_rule",
    _auth,
    wants=lambda t: _param_keys(t, _credential),
    offers=_offers_credentials,
)


def _offers_login(p: ToolProfile) -> tuple[Hashable, ...]:
    return _tool_key(p.source, p.is_auth and bool(p.service_words))  # a login only serves its own source


def _needs_service_login(t: ToolProfile) -> bool:
    return not (t.is_auth or any(_AUTH_PARAM_WORDS.intersection(param_words(p)) for p in t.params))


def _service_auth(
    subjects: Sequence[ToolProfile], universe: Sequence[ToolProfile], scope: Scope | None = None
) -> Iterator[DependencyEdge]:
    """A tool of a service that has a login needs that login, even without a session parameter."""
    logins = group_by(universe, _offers_login)
    for t in subjects:
        if not _needs_service_login(t):
            continue
        names = set(t.name_words)
        cands = [
            (len(p.service_words), p)
            for p in logins.get(t.source, [])
            if p.id != t.id and p.service_words <= names
        ]
        best = _best(t, cands, scope)
        if best is not None:
            yield _SERVICE_AUTH.edge(t, best, service=sorted(best.service_words))


_SERVICE_AUTH = EdgeText(
    "service_auth_rule",
    _NEEDS,
    "tools of this service need a login first ({p})",
    "shared service name {service}",
)
service_auth_rule = Rule(
    "service_auth_rule",
    _service_auth,
    wants=lambda t: _tool_key(t.source, _needs_service_login(t)),
    offers=_offers_login,
)


# -- parameters ----------------------------------------------------------------------------------------
def _identity_name(pw: tuple[str, ...]) -> str | None:
    pname = "_".join(pw)
    return None if not pname or pname in _VAGUE or _AUTH_PARAM_WORDS.intersection(pw) else pname


def _identity(
    subjects: Sequence[ToolProfile], universe: Sequence[ToolProfile], scope: Scope | None = None
) -> Iterator[DependencyEdge]:
    """An input named exactly like what another tool returns (``country_code`` ← get_country_code)."""
    index = group_by(universe, _product_phrases)
    ranked: dict[str, tuple[_Ranked, list[ToolProfile]]] = {}
    for t, param, pw, pname in _keyed_params(subjects, _identity_name, scope):
        if pname not in ranked:
            makers = [p for p in index.get(pname, []) if not p.is_setter and p.verb not in _CHECK_VERBS]
            in_focus = makers if scope is None else scope.among(makers)
            ranked[pname] = (_Ranked.of(makers, partial(_identity_score, pname)), in_focus)
        order, in_focus = ranked[pname]
        allowed = partial(_may_produce, t, param)
        if scope is not None and not scope.reaches(t, in_focus, allowed):
            continue
        best = order.best(t, allowed)
        if best is None or (scope is not None and not scope.keeps(t, best)):
            continue
        how = "output field" if pname in best.outputs else "name"
        text = _IDENTITY_DEFAULT if best.is_ambient else _IDENTITY
        evidence = f"input {param!r} matches {best.id}'s {how} {pname!r}"
        yield text.edge(t, best, param, variant=_identity_variant(how, best, pw), evidence=evidence)


def _identity_score(pname: str, p: ToolProfile) -> float:
    return 1.0 + (pname in p.outputs)  # an output field says more than a name


def _may_produce(t: ToolProfile, param: str, p: ToolProfile) -> bool:
    return (
        p.id != t.id
        and param not in p.params
        and not is_sibling(t, p)
        and (not p.is_ambient or _may_default(t, param, p))
    )


def _product_phrases(p: ToolProfile) -> set[str]:
    return p.product_phrases


def _identity_variant(how: str, producer: ToolProfile, pw: tuple[str, ...]) -> str:
    """Calibrated apart: defaults from a fleet's declared context (``core``) tools or from any
    input-free reader; output-field matches; one-word names (``crop``) or phrases (``fluid_density``)."""
    if producer.is_ambient:
        return "/default-" + ("core" if producer.kind == "core" else "reader")
    if how == "output field":
        return "/output"
    return "/name-" + ("phrase" if len(pw) > 1 else "word")


_IDENTITY = EdgeText("identity_rule", _DIRECT, "{param} is what {p} returns", "{evidence}")
_IDENTITY_DEFAULT = EdgeText("identity_rule", _DEFAULT, "{p} supplies a default for {param}", "{evidence}")
identity_rule = Rule(
    "identity_rule",
    _identity,
    wants=lambda t: _param_keys(t, _identity_name),
    offers=_product_phrases,
)


def _family(
    subjects: Sequence[ToolProfile], universe: Sequence[ToolProfile], scope: Scope | None = None
) -> Iterator[DependencyEdge]:
    """Date, time, location, language, time-zone inputs default to the current value of a context tool."""
    by_family = group_by(universe, _families)
    for t, param, pw, family in _keyed_params(subjects, param_family, scope):
        cands = [
            (1.0 + (pw[-1] in p.subject_words), p)
            for p in by_family.get(family, [])
            if p.id != t.id and family not in t.families and _may_default(t, param, p)
        ]
        best = _best(t, cands, scope)
        if best is not None:
            variant = "/core" if best.kind == "core" else "/optional"
            yield _FAMILY.edge(t, best, param, variant=variant, family=family)


def _families(p: ToolProfile) -> frozenset[str]:
    return p.families


_FAMILY = EdgeText(
    "family_rule",
    _DEFAULT,
    "{p} gives the current {family} when the user does not say",
    "input {param!r} is a {family}; {p} reports the current {family}",
)
family_rule = Rule("family_rule", _family, wants=lambda t: _param_keys(t, param_family), offers=_families)


def _value_head(pw: tuple[str, ...]) -> tuple[str, ...]:
    """The words naming what a parameter holds: ``user_email_address`` → ``(user, email)``;
    ``email_notifications`` stays as is (it holds notification settings, not an email)."""
    if len(pw) > 1 and pw[-1] in ("address", "string", "value", "text"):
        return pw[:-1]
    return pw


def _validator(
    subjects: Sequence[ToolProfile], universe: Sequence[ToolProfile], scope: Scope | None = None
) -> Iterator[DependencyEdge]:
    """An input that a ``validate_*`` / ``verify_*`` tool checks (``email`` ← validate_email)."""
    validators = group_by(universe, _offers_validation)
    for t, param, pw, last in _keyed_params(subjects, _validated, scope):
        head = _value_head(pw)
        cands = [
            (float(len(v.subject_words)), v)
            for v in validators.get(last, [])
            if v.id != t.id and head[-len(v.subject_words) :] == v.subject_words
        ]
        best = _best(t, cands, scope)
        if best is not None:
            yield _VALIDATOR.edge(t, best, param, what=" ".join(best.subject_words))


def _validated(pw: tuple[str, ...]) -> str | None:
    """The last word of what a parameter holds: a validator of it must end with that word."""
    head = _value_head(pw)
    return head[-1] if head else None


def _offers_validation(p: ToolProfile) -> tuple[str, ...]:
    return p.subject_words[-1:] if p.is_validator else ()


_VALIDATOR = EdgeText(
    "validator_rule",
    _DIRECT,
    "{param} should be validated with {p} first",
    "input {param!r}; {p} validates {what}",
)
validator_rule = Rule(
    "validator_rule", _validator, wants=lambda t: _param_keys(t, _validated), offers=_offers_validation
)

_MAKERS = wordset(
    "get list create set add generate search find register make lookup fetch retrieve new query"
)


def _entity(pw: tuple[str, ...]) -> str | None:
    """The thing a ``<thing>_id`` / ``<thing>_code`` parameter identifies, if it names one."""
    if len(pw) < 2 or pw[-1] not in ("id", "code", "number", "key") or _AUTH_PARAM_WORDS.intersection(pw):
        return None
    entity = pw[-2]
    return None if entity in ("user", "api", "item", "unique") or len(entity) < 3 else entity


def _entity_id(
    subjects: Sequence[ToolProfile], universe: Sequence[ToolProfile], scope: Scope | None = None
) -> Iterator[DependencyEdge]:
    """``<thing>_id`` / ``<thing>_code`` comes from a tool that creates, lists or looks up <thing>s."""
    by_object = group_by(universe, _offers_entities)
    for t, param, pw, entity in _keyed_params(subjects, _entity, scope):
        cands = []
        for p in by_object.get(entity, []):
            if p.id == t.id or param in p.params:
                continue
            if "_".join(pw) in p.product_phrases:
                continue  # identity_rule already links it
            # finding an existing <thing> is what an id parameter usually needs; creating one comes next
            finds = 0.5 if p.verb in ("list", "search", "find", "query", "lookup") else 0.0
            score = 1.0 + (p.source == t.source) + 0.5 * len(p.service_words & set(t.name_words)) + finds
            cands.append((score, p))
        best = _best(t, cands, scope)
        if best is not None:
            facts = {"entity": entity, "verb": best.verb, "objects": " ".join(best.object_words)}
            yield _ENTITY.edge(t, best, param, **facts)


def _offers_entities(p: ToolProfile) -> frozenset[str]:
    return frozenset(p.object_words) if p.verb in _MAKERS else frozenset()


_ENTITY = EdgeText(
    "entity_id_rule",
    _DIRECT,
    "{param} identifies a {entity} that {p} provides",
    "input {param!r}; {p} {verb}s {objects}",
)
entity_id_rule = Rule(
    "entity_id_rule", _entity_id, wants=lambda t: _param_keys(t, _entity), offers=_offers_entities
)


def _unit_params(t: ToolProfile) -> list[str]:
    return [p for p in t.params if len(words(p)) >= 2 and words(p)[-1] in UNIT_WORDS]


def _offers_conversion(p: ToolProfile) -> tuple[Hashable, ...]:
    return _tool_key("unit", p.is_converter)


def _unit(
    subjects: Sequence[ToolProfile], universe: Sequence[ToolProfile], scope: Scope | None = None
) -> Iterator[DependencyEdge]:
    """Inputs with a unit in their name (``weight_kg``) may need a unit conversion first."""
    converters = group_by(universe, _offers_conversion).get("unit", ())
    for t in subjects:
        params = _unit_params(t)
        best = best_candidate(t, [(1.0, c) for c in converters if c.id != t.id])
        if params and best is not None:
            yield _UNIT.edge(t, best, ",".join(params), units=", ".join(params), params=params)


_UNIT = EdgeText(
    "unit_rule",
    _DEFAULT,
    "{units} must be in a given unit; {p} converts other units",
    "unit suffix in {params}",
)
unit_rule = Rule(
    "unit_rule",
    _unit,
    wants=lambda t: _tool_key("unit", bool(_unit_params(t))),
    offers=_offers_conversion,
)


# -- environment ---------------------------------------------------------------------------------------
def _offers_capability(p: ToolProfile) -> tuple[str, ...]:
    return p.status_capability[:1]


def _capability(
    subjects: Sequence[ToolProfile], universe: Sequence[ToolProfile], scope: Scope | None = None
) -> Iterator[DependencyEdge]:
    """A tool named after a capability (bluetooth, location) needs that capability's status checked."""
    # a reader whose capability the name mentions is filed under the capability's first word
    readers = group_by(universe, _offers_capability)
    for t in subjects:
        if t.status_capability or t.is_setter:
            continue
        names = set(t.name_words)
        cands = [
            (float(len(r.status_capability)), r)
            for first in names
            for r in readers.get(first, ())
            if r.id != t.id and set(r.status_capability) <= names
        ]
        best = _best(t, cands, scope)
        if best is not None:
            yield _CAPABILITY.edge(t, best, cap=" ".join(best.status_capability))


_CAPABILITY = EdgeText(
    "capability_rule", _NEEDS, "needs {cap} to be on; {p} reports whether it is", "tool name mentions {cap!r}"
)
capability_rule = Rule(
    "capability_rule",
    _capability,
    wants=lambda t: () if t.status_capability or t.is_setter else set(t.name_words),
    offers=_offers_capability,
)


def _state(p: ToolProfile) -> tuple[str, ...]:
    return tuple(w for w in p.subject_words if w not in ("status", "state"))


def _state_role(p: ToolProfile) -> str | None:
    """``setter`` or ``reader`` of the state its name is about (``set_volume`` / ``get_volume``), or None."""
    if not _state(p):
        return None
    if p.verb in ("get", "check", "read") and not p.required:
        return "reader"
    return "setter" if p.is_setter else None


def _role_of(p: ToolProfile) -> tuple[Hashable, ...]:
    role = _state_role(p)
    return () if role is None else ((role, p.source, _state(p)),)


def _state_pair(
    subjects: Sequence[ToolProfile], universe: Sequence[ToolProfile], scope: Scope | None = None
) -> Iterator[DependencyEdge]:
    """A setter and a reader of the same state go together: read before changing, change after reading."""
    by_role = group_by(universe, _role_of)
    for t in subjects:
        role = _state_role(t)
        if role is None:
            continue
        state = " ".join(_state(t))
        partner = "reader" if role == "setter" else "setter"
        if role == "setter":
            why = f"read the current {state} before changing it"
        else:
            why = f"change {state} if the reading is not what is needed"
        for p in by_role.get((partner, t.source, _state(t)), []):
            yield _STATE_PAIR.edge(t, p, variant=f"/{role}", why=why, state=state)


_STATE_PAIR = EdgeText("state_pair_rule", _GOES_WITH, "{why}", "setter/reader pair on {state!r}")
state_pair_rule = Rule(
    "state_pair_rule",
    _state_pair,
    wants=lambda t: _tool_key((t.source, _state(t)), _state_role(t) is not None),
    offers=lambda p: _tool_key((p.source, _state(p)), _state_role(p) is not None),
)


def _reader_score(p: ToolProfile) -> float:
    """How well ``p`` tells whether the network is up (0: it does not)."""
    if not p.status_capability:
        return 0.0
    hits = len((set(p.name_words) | set(words(p.description))) & _CONNECTIVITY_WORDS)
    return hits + 0.5 * (p.kind == "core") if hits else 0.0


def _connectivity_reader(universe: Sequence[ToolProfile]) -> ToolProfile | None:
    candidates = group_by(universe, _may_read_network).get("network", ())
    scored = [(score, p) for p in candidates if (score := _reader_score(p))]
    if not scored:
        return None
    scored.sort(key=lambda sp: (-sp[0], sp[1].id))
    return scored[0][1]


def _says_online(t: ToolProfile) -> frozenset[str]:
    return t.memo(
        "online", lambda t: frozenset((set(t.name_words) | set(words(t.description))) & _NETWORK_WORDS)
    )


def _network_users(
    universe: Sequence[ToolProfile], *, prior: bool
) -> tuple[ToolProfile, Callable[[ToolProfile], bool]] | None:
    """The connectivity reader and who may depend on it, or ``None``: no reader, or (``prior``) the
    fleet does not show the prior (at most ``FLEET_PRIOR_SHARE`` of its tools mention the network)."""
    reader = _connectivity_reader(universe)
    if reader is None:
        return None

    def dependent(t: ToolProfile) -> bool:
        return t.id != reader.id and bool(_fleet_keys(t))

    if prior:  # counted from the universe's grouping (kept across ingests), the reader left out
        members, own = group_by(universe, _fleet_keys), _fleet_keys(reader)
        fleet = len(members.get("fleet", ())) - ("fleet" in own)
        online = len(members.get("online", ())) - ("online" in own)
        if online <= FLEET_PRIOR_SHARE * fleet:
            return None
    return reader, dependent


def _fleet_keys(t: ToolProfile) -> tuple[str, ...]:
    """``("fleet",)`` for a tool that may need the network (not a local, core or status tool), plus
    ``"online"`` when its own text says it uses the network."""
    if t.kind == "core" or t.status_capability or t.is_ambient:
        return ()
    return ("fleet", "online") if _says_online(t) else ("fleet",)


def _network_edges(
    subjects: Sequence[ToolProfile], universe: Sequence[ToolProfile], *, prior: bool
) -> Iterator[DependencyEdge]:
    """Edges to the connectivity reader: from tools that say they use the network (or log in), or
    (``prior``) from the fleet's other tools."""
    online = _network_users(universe, prior=prior)
    if online is None:
        return
    reader, dependent = online
    for t in subjects:
        said = _says_online(t)
        own_evidence = bool(said or t.is_auth)
        if not dependent(t) or own_evidence == prior:  # the prior covers just the tools without evidence
            continue
        if prior:
            yield _ONLINE_PRIOR.edge(t, reader)
        else:
            authentication = " (authentication)" if t.is_auth else ""
            yield _ONLINE.edge(t, reader, why=f"network words {sorted(said)[:4]}{authentication}")


def _connectivity(
    subjects: Sequence[ToolProfile], universe: Sequence[ToolProfile], scope: Scope | None = None
) -> Iterator[DependencyEdge]:
    """A tool whose own text says it uses the network needs it up: the connectivity reader comes first.

    Evidence of the tool itself; the fleet-wide default is ``connectivity_prior_rule``.
    """
    return _network_edges(subjects, universe, prior=False)


def _connectivity_prior(
    subjects: Sequence[ToolProfile], universe: Sequence[ToolProfile], scope: Scope | None = None
) -> Iterator[DependencyEdge]:
    """In a fleet that shows it, the other (non-local) tools need the network too: a weak prior whose
    calibrated confidence decides whether retrieval may use it. A fleet where at most
    ``FLEET_PRIOR_SHARE`` of the tools mention the network gets none, whatever its tools are called."""
    return _network_edges(subjects, universe, prior=True)


def _anyone(t: ToolProfile) -> tuple[str, ...]:
    return ("network",)


def _may_read_network(p: ToolProfile) -> tuple[str, ...]:
    # any tool that could be the fleet's connectivity reader (which one is, depends on the whole fleet)
    return _tool_key("network", _reader_score(p) > 0)  # type: ignore[return-value]


_ONLINE = EdgeText("connectivity_rule", _NEEDS, "uses the network; {p} tells whether it is up", "{why}")
_ONLINE_PRIOR = EdgeText(
    "connectivity_prior_rule",
    _NEEDS,
    "most tools of this fleet use the network; {p} tells whether it is up",
    "fleet prior",
)
connectivity_rule = Rule("connectivity_rule", _connectivity, wants=_anyone, offers=_may_read_network)
connectivity_prior_rule = Rule(
    "connectivity_prior_rule", _connectivity_prior, wants=_anyone, offers=_may_read_network
)

RULES: tuple[Rule, ...] = (
    auth_rule,
    service_auth_rule,
    identity_rule,
    validator_rule,
    family_rule,
    entity_id_rule,
    unit_rule,
    capability_rule,
    state_pair_rule,
    connectivity_rule,
    connectivity_prior_rule,
)
