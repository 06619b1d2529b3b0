"""Parameter rules: an input named like what another tool returns, context defaults for dates and
places, validators, ``<thing>_id`` producers and unit conversions."""

from __future__ import annotations

from collections.abc import Hashable, Iterator, Sequence
from functools import partial

from toolweave.inference.producers import ToolProfile, param_family
from toolweave.inference.rules.base import (
    AUTH_PARAM_WORDS,
    CHECK_VERBS,
    DEFAULT,
    DIRECT,
    VAGUE,
    EdgeText,
    Ranked,
    Rule,
    Scope,
    best_allowed,
    best_candidate,
    is_sibling,
    keyed_params,
    may_default,
    param_keys,
    tool_key,
)
from toolweave.inference.text import words, wordset
from toolweave.inference.universe import group_by
from toolweave.records import DependencyEdge

__all__ = [
    "UNIT_WORDS",
    "entity_id_rule",
    "family_rule",
    "identity_rule",
    "unit_rule",
    "validator_rule",
]

UNIT_WORDS = wordset(
    "kg kgs g gram grams lb lbs pound pounds oz ounce ounces m cm mm km meter meters metre metres mi mile "
    "miles ft feet foot inch inches yd celsius fahrenheit kelvin c f ml l liter liters litre litres gal "
    "gallon gallons mph kph kmh"
)


def _identity_name(pw: tuple[str, ...]) -> str | None:
    pname = "_".join(pw)
    return None if not pname or pname in VAGUE or AUTH_PARAM_WORDS.intersection(pw) else pname


def _identity(
    subjects: Sequence[ToolProfile], universe: Sequence[ToolProfile], scope: Scope | None = None
) -> Iterator[DependencyEdge]:
    """An input named exactly like what another tool returns (``country_code`` ← get_country_code)."""
    index = group_by(universe, _product_phrases)
    ranked: dict[str, tuple[Ranked, list[ToolProfile]]] = {}
    for t, param, pw, pname in keyed_params(subjects, _identity_name, scope):
        if pname not in ranked:
            makers = [p for p in index.get(pname, []) if not p.is_setter and p.verb not in CHECK_VERBS]
            in_focus = makers if scope is None else scope.among(makers)
            ranked[pname] = (Ranked.of(makers, partial(_identity_score, pname)), in_focus)
        order, in_focus = ranked[pname]
        allowed = partial(_may_produce, t, param)
        if scope is not None and not scope.reaches(t, in_focus, allowed):
            continue
        best = order.best(t, allowed)
        if best is None or (scope is not None and not scope.keeps(t, best)):
            continue
        how = "description" if pname in best.said else "name"
        text = _IDENTITY_DEFAULT if best.is_ambient else _IDENTITY
        evidence = f"input {param!r} matches {best.id}'s {how} {pname!r}"
        yield text.edge(t, best, param, variant=_identity_variant(how, best, pw), evidence=evidence)


def _identity_score(pname: str, p: ToolProfile) -> float:
    return 1.0 + (pname in p.said)  # the description saying so says more than a name


def _may_produce(t: ToolProfile, param: str, p: ToolProfile) -> bool:
    return (
        p.id != t.id
        and param not in p.params
        and not is_sibling(t, p)
        and (not p.is_ambient or may_default(t, param, p))
    )


def _product_phrases(p: ToolProfile) -> set[str]:
    return p.product_phrases


def _identity_variant(how: str, producer: ToolProfile, pw: tuple[str, ...]) -> str:
    """Calibrated apart: defaults from a fleet's declared context (``core``) tools or from any
    input-free reader; identifiers the description says it returns; one-word names (``crop``) or
    phrases (``fluid_density``)."""
    if producer.is_ambient:
        return "/default-" + ("core" if producer.kind == "core" else "reader")
    if how == "description":
        return "/described"
    return "/name-" + ("phrase" if len(pw) > 1 else "word")


_IDENTITY = EdgeText("identity_rule", DIRECT, "{param} is what {p} returns", "{evidence}")
_IDENTITY_DEFAULT = EdgeText("identity_rule", DEFAULT, "{p} supplies a default for {param}", "{evidence}")
identity_rule = Rule(
    "identity_rule",
    _identity,
    wants=lambda t: param_keys(t, _identity_name),
    offers=_product_phrases,
)


def _family(
    subjects: Sequence[ToolProfile], universe: Sequence[ToolProfile], scope: Scope | None = None
) -> Iterator[DependencyEdge]:
    """Date, time, location, language, time-zone inputs default to the current value of a context tool."""
    by_family = group_by(universe, _families)
    for t, param, pw, family in keyed_params(subjects, param_family, scope):
        cands = [
            (1.0 + (pw[-1] in p.subject_words), p)
            for p in by_family.get(family, [])
            if p.id != t.id and family not in t.families and may_default(t, param, p)
        ]
        best = best_allowed(t, cands, scope)
        if best is not None:
            variant = "/core" if best.kind == "core" else "/optional"
            yield _FAMILY.edge(t, best, param, variant=variant, family=family)


def _families(p: ToolProfile) -> frozenset[str]:
    return p.families


_FAMILY = EdgeText(
    "family_rule",
    DEFAULT,
    "{p} gives the current {family} when the user does not say",
    "input {param!r} is a {family}; {p} reports the current {family}",
)
family_rule = Rule("family_rule", _family, wants=lambda t: param_keys(t, param_family), offers=_families)


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
    for t, param, pw, last in keyed_params(subjects, _validated, scope):
        head = _value_head(pw)
        cands = [
            (float(len(v.subject_words)), v)
            for v in validators.get(last, [])
            if v.id != t.id and head[-len(v.subject_words) :] == v.subject_words
        ]
        best = best_allowed(t, cands, scope)
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
    DIRECT,
    "{param} should be validated with {p} first",
    "input {param!r}; {p} validates {what}",
)
validator_rule = Rule(
    "validator_rule", _validator, wants=lambda t: param_keys(t, _validated), offers=_offers_validation
)

_MAKERS = wordset(
    "get list create set add generate search find register make lookup fetch retrieve new query"
)


def _entity(pw: tuple[str, ...]) -> str | None:
    """The thing a ``<thing>_id`` / ``<thing>_code`` parameter identifies, if it names one."""
    if len(pw) < 2 or pw[-1] not in ("id", "code", "number", "key") or AUTH_PARAM_WORDS.intersection(pw):
        return None
    entity = pw[-2]
    return None if entity in ("user", "api", "item", "unique") or len(entity) < 3 else entity


def _entity_id(
    subjects: Sequence[ToolProfile], universe: Sequence[ToolProfile], scope: Scope | None = None
) -> Iterator[DependencyEdge]:
    """``<thing>_id`` / ``<thing>_code`` comes from a tool that creates, lists or looks up <thing>s."""
    by_object = group_by(universe, _offers_entities)
    for t, param, pw, entity in keyed_params(subjects, _entity, scope):
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
        best = best_allowed(t, cands, scope)
        if best is not None:
            facts = {"entity": entity, "verb": best.verb, "objects": " ".join(best.object_words)}
            yield _ENTITY.edge(t, best, param, **facts)


def _offers_entities(p: ToolProfile) -> frozenset[str]:
    return frozenset(p.object_words) if p.verb in _MAKERS else frozenset()


_ENTITY = EdgeText(
    "entity_id_rule",
    DIRECT,
    "{param} identifies a {entity} that {p} provides",
    "input {param!r}; {p} {verb}s {objects}",
)
entity_id_rule = Rule(
    "entity_id_rule", _entity_id, wants=lambda t: param_keys(t, _entity), offers=_offers_entities
)


def _unit_params(t: ToolProfile) -> list[str]:
    return [p for p in t.params if len(words(p)) >= 2 and words(p)[-1] in UNIT_WORDS]


def _offers_conversion(p: ToolProfile) -> tuple[Hashable, ...]:
    return tool_key("unit", p.is_converter)


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
    DEFAULT,
    "{units} must be in a given unit; {p} converts other units",
    "unit suffix in {params}",
)
unit_rule = Rule(
    "unit_rule",
    _unit,
    wants=lambda t: tool_key("unit", bool(_unit_params(t))),
    offers=_offers_conversion,
)
