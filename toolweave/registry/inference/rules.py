"""Precision-first inference rules over ``ToolProfile``s.

Each rule is a generator of ``DependencyEdge``s with ``origin="inferred"``, a ``reason`` a person can
read, the ``evidence`` (which words matched) and a ``confidence`` in [0, 1]. Rules rely on naming
conventions that hold across APIs (verb-object names, ``*_id`` / ``*_code`` identifiers, session and
token parameters, ``validate_*`` tools, ``get_*_status`` readers) and on generic vocabulary (value
families such as dates and locations, measurement units, connectivity words), never on tool names.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from functools import lru_cache

from toolweave.records import DependencyEdge, EdgeKind
from toolweave.registry.inference.producers import ToolProfile, param_family
from toolweave.registry.inference.text import singular, words, wordset

__all__ = [
    "FLEET_PRIOR_SHARE",
    "RULES",
    "UNIT_WORDS",
    "Rule",
    "best_candidate",
    "inferred_edge",
    "is_sibling",
    "param_words",
]

Rule = Callable[[Sequence[ToolProfile], Sequence[ToolProfile]], Iterator[DependencyEdge]]
"""``rule(subjects, universe)``: edges out of each subject, to any tool of the universe."""

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


def inferred_edge(
    t: ToolProfile,
    p: ToolProfile,
    kind: EdgeKind,
    param: str | None,
    reason: str,
    evidence: str,
    rule: str,
) -> DependencyEdge:
    """An inferred edge; ``rule`` names the rule (and the kind of evidence, ``identity_rule/output``)
    whose calibrated confidence it gets (``calibration.RULE_CONFIDENCE``)."""
    return DependencyEdge(
        tool=t.id,
        depends_on=p.id,
        kind=kind,
        parameter_name=param,
        reason=reason,
        origin="inferred",
        confidence=0.0,
        evidence=f"{rule}: {evidence}",
    )


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


def is_sibling(t: ToolProfile, p: ToolProfile) -> bool:
    """``p`` takes the same key inputs as ``t``: another operation on the same record, not its source."""
    if p.required and set(p.required) <= set(t.params):
        return True
    # reading and writing one resource (query_x / record_x) are siblings: the reader does not feed the writer
    return bool(p.subject_words) and set(p.subject_words) <= set(t.name_words)


def _may_default(t: ToolProfile, param: str, p: ToolProfile) -> bool:
    """Can context tool ``p`` supply a default for ``param``?

    A source that marks tools as ``core`` tells us those are context suppliers: trust it for any
    parameter. Otherwise a default only makes sense for a parameter the caller may leave out.
    """
    return p.kind == "core" or param not in t.required


# -- authentication ------------------------------------------------------------------------------------
def _auth_producers(universe: Sequence[ToolProfile]) -> list[ToolProfile]:
    return [
        p
        for p in universe
        if p.is_auth
        or any(w in _AUTH_PARAM_WORDS for w in p.outputs)
        or (
            p.verb in ("get", "generate", "obtain", "request", "issue", "create")
            and "token" in p.object_words
        )
    ]


def auth_rule(subjects: Sequence[ToolProfile], universe: Sequence[ToolProfile]) -> Iterator[DependencyEdge]:
    """``session_id`` / ``token`` inputs come from the login (or token) tool of the same service."""
    producers = _auth_producers(universe)
    for t in subjects:
        for param in t.params:
            pw = param_words(param)
            # the value is a credential (session_id, access_token), not about a session (session_date)
            if not (pw[-1] in _AUTH_PARAM_WORDS or (pw[-1] in ("id", "key") and "session" in pw)):
                continue
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
                score = (
                    3.0 * exact + 2.0 * overlap + 1.0 * p.is_auth + 1.0 * named + 0.5 * (p.source == t.source)
                )
                scored.append((score, p))
            best = best_candidate(t, scored)
            if best is None:
                continue
            ev = f"input {param!r}; " + (
                f"{best.id} outputs {sorted(best.outputs & {pname, pw[-1]})}"
                if best.outputs & {pname, pw[-1]}
                else f"{best.id} is an authentication tool"
            )
            shared = sorted(best.service_words & set(t.name_words))
            if shared:
                ev += f"; same service {shared}"
            yield inferred_edge(
                t,
                best,
                EdgeKind.PARAMETER_DIRECTLY_DEPENDS_ON,
                param,
                f"{param} is issued by authenticating with {best.id}",
                ev,
                "auth_rule",
            )


def service_auth_rule(
    subjects: Sequence[ToolProfile], universe: Sequence[ToolProfile]
) -> Iterator[DependencyEdge]:
    """A tool of a service that has a login needs that login, even without a session parameter."""
    logins: dict[str, list[ToolProfile]] = {}  # by source: a login only serves its own source
    for p in universe:
        if p.is_auth and p.service_words:
            logins.setdefault(p.source, []).append(p)
    for t in subjects:
        if t.is_auth or any(_AUTH_PARAM_WORDS.intersection(param_words(p)) for p in t.params):
            continue
        names = set(t.name_words)
        cands = [
            (len(p.service_words), p)
            for p in logins.get(t.source, [])
            if p.id != t.id and p.service_words <= names
        ]
        best = best_candidate(t, cands)
        if best is not None:
            yield inferred_edge(
                t,
                best,
                EdgeKind.TOOL_DIRECTLY_DEPENDS_ON,
                None,
                f"tools of this service need a login first ({best.id})",
                f"shared service name {sorted(best.service_words)}",
                "service_auth_rule",
            )


# -- parameters ----------------------------------------------------------------------------------------
def identity_rule(
    subjects: Sequence[ToolProfile], universe: Sequence[ToolProfile]
) -> Iterator[DependencyEdge]:
    """An input named exactly like what another tool returns (``country_code`` ← get_country_code)."""
    index: dict[str, list[ToolProfile]] = {}
    for p in universe:
        for phrase in p.product_phrases:
            index.setdefault(phrase, []).append(p)
    for t in subjects:
        for param in t.params:
            pw = param_words(param)
            pname = "_".join(pw)
            if pname in _VAGUE or _AUTH_PARAM_WORDS.intersection(pw):
                continue
            cands = [
                p
                for p in index.get(pname, [])
                if p.id != t.id
                and param not in p.params
                and not p.is_setter
                and p.verb not in _CHECK_VERBS
                and not is_sibling(t, p)
                and (not p.is_ambient or _may_default(t, param, p))
            ]
            best = best_candidate(t, [(1.0 + (pname in p.outputs), p) for p in cands])
            if best is None:
                continue
            ambient = best.is_ambient
            kind = (
                EdgeKind.PARAMETER_INDIRECTLY_DEPENDS_ON
                if ambient
                else EdgeKind.PARAMETER_DIRECTLY_DEPENDS_ON
            )
            how = "output field" if pname in best.outputs else "name"
            reason = (
                f"{best.id} supplies a default for {param}"
                if ambient
                else f"{param} is what {best.id} returns"
            )
            yield inferred_edge(
                t,
                best,
                kind,
                param,
                reason,
                f"input {param!r} matches {best.id}'s {how} {pname!r}",
                _identity_variant(ambient, how, best, pw),
            )


def _identity_variant(ambient: bool, how: str, producer: ToolProfile, pw: tuple[str, ...]) -> str:
    """Calibrated apart: defaults from a fleet's declared context (``core``) tools or from any
    input-free reader; output-field matches; one-word names (``crop``) or phrases (``fluid_density``)."""
    if ambient:
        return "identity_rule/default-" + ("core" if producer.kind == "core" else "reader")
    if how == "output field":
        return "identity_rule/output"
    return "identity_rule/name-" + ("phrase" if len(pw) > 1 else "word")


def family_rule(subjects: Sequence[ToolProfile], universe: Sequence[ToolProfile]) -> Iterator[DependencyEdge]:
    """Date, time, location, language, time-zone inputs default to the current value of a context tool."""
    by_family: dict[str, list[ToolProfile]] = {}
    for p in universe:
        for fam in p.families:
            by_family.setdefault(fam, []).append(p)
    for t in subjects:
        for param in t.params:
            pw = param_words(param)
            family = param_family(pw)
            if family is None:
                continue
            cands = [
                (1.0 + (pw[-1] in p.subject_words), p)
                for p in by_family.get(family, [])
                if p.id != t.id and family not in t.families and _may_default(t, param, p)
            ]
            best = best_candidate(t, cands)
            if best is not None:
                yield inferred_edge(
                    t,
                    best,
                    EdgeKind.PARAMETER_INDIRECTLY_DEPENDS_ON,
                    param,
                    f"{best.id} gives the current {family} when the user does not say",
                    f"input {param!r} is a {family}; {best.id} reports the current {family}",
                    "family_rule/" + ("core" if best.kind == "core" else "optional"),
                )


def _value_head(pw: tuple[str, ...]) -> tuple[str, ...]:
    """The words naming what a parameter holds: ``user_email_address`` → ``(user, email)``;
    ``email_notifications`` stays as is (it holds notification settings, not an email)."""
    if len(pw) > 1 and pw[-1] in ("address", "string", "value", "text"):
        return pw[:-1]
    return pw


def validator_rule(
    subjects: Sequence[ToolProfile], universe: Sequence[ToolProfile]
) -> Iterator[DependencyEdge]:
    """An input that a ``validate_*`` / ``verify_*`` tool checks (``email`` ← validate_email)."""
    validators = [p for p in universe if p.is_validator and p.subject_words]
    for t in subjects:
        for param in t.params:
            head = _value_head(param_words(param))
            cands = [
                (float(len(v.subject_words)), v)
                for v in validators
                if v.id != t.id and head[-len(v.subject_words) :] == v.subject_words
            ]
            best = best_candidate(t, cands)
            if best is not None:
                yield inferred_edge(
                    t,
                    best,
                    EdgeKind.PARAMETER_DIRECTLY_DEPENDS_ON,
                    param,
                    f"{param} should be validated with {best.id} first",
                    f"input {param!r}; {best.id} validates {' '.join(best.subject_words)}",
                    "validator_rule",
                )


def entity_id_rule(
    subjects: Sequence[ToolProfile], universe: Sequence[ToolProfile]
) -> Iterator[DependencyEdge]:
    """``<thing>_id`` / ``<thing>_code`` comes from a tool that creates, lists or looks up <thing>s."""
    makers = (
        "get",
        "list",
        "create",
        "set",
        "add",
        "generate",
        "search",
        "find",
        "register",
        "make",
        "lookup",
        "fetch",
        "retrieve",
        "new",
        "query",
    )
    by_object: dict[str, list[ToolProfile]] = {}
    for p in universe:
        if p.verb in makers:
            for w in set(p.object_words):
                by_object.setdefault(w, []).append(p)
    for t in subjects:
        for param in t.params:
            pw = param_words(param)
            if (
                len(pw) < 2
                or pw[-1] not in ("id", "code", "number", "key")
                or _AUTH_PARAM_WORDS.intersection(pw)
            ):
                continue
            entity = pw[-2]
            if entity in ("user", "api", "item", "unique") or len(entity) < 3:
                continue
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
            best = best_candidate(t, cands)
            if best is not None:
                yield inferred_edge(
                    t,
                    best,
                    EdgeKind.PARAMETER_DIRECTLY_DEPENDS_ON,
                    param,
                    f"{param} identifies a {entity} that {best.id} provides",
                    f"input {param!r}; {best.id} {best.verb}s {' '.join(best.object_words)}",
                    "entity_id_rule",
                )


def unit_rule(subjects: Sequence[ToolProfile], universe: Sequence[ToolProfile]) -> Iterator[DependencyEdge]:
    """Inputs with a unit in their name (``weight_kg``) may need a unit conversion first."""
    converters = [p for p in universe if p.is_converter]
    for t in subjects:
        params = [p for p in t.params if len(words(p)) >= 2 and words(p)[-1] in UNIT_WORDS]
        cands = [(1.0, c) for c in converters if c.id != t.id]
        best = best_candidate(t, cands)
        if params and best is not None:
            yield inferred_edge(
                t,
                best,
                EdgeKind.PARAMETER_INDIRECTLY_DEPENDS_ON,
                ",".join(params),
                f"{', '.join(params)} must be in a given unit; {best.id} converts other units",
                f"unit suffix in {params}",
                "unit_rule",
            )


# -- environment ---------------------------------------------------------------------------------------
def capability_rule(
    subjects: Sequence[ToolProfile], universe: Sequence[ToolProfile]
) -> Iterator[DependencyEdge]:
    """A tool named after a capability (bluetooth, location) needs that capability's status checked."""
    readers = [p for p in universe if p.status_capability]
    for t in subjects:
        if t.status_capability or t.is_setter:
            continue
        names = set(t.name_words)
        cands = [
            (float(len(r.status_capability)), r)
            for r in readers
            if r.id != t.id and set(r.status_capability) <= names
        ]
        best = best_candidate(t, cands)
        if best is not None:
            cap = " ".join(best.status_capability)
            yield inferred_edge(
                t,
                best,
                EdgeKind.TOOL_DIRECTLY_DEPENDS_ON,
                None,
                f"needs {cap} to be on; {best.id} reports whether it is",
                f"tool name mentions {cap!r}",
                "capability_rule",
            )


def state_pair_rule(
    subjects: Sequence[ToolProfile], universe: Sequence[ToolProfile]
) -> Iterator[DependencyEdge]:
    """A setter and a reader of the same state go together: read before changing, change after reading."""

    def key(p: ToolProfile) -> tuple[str, ...]:
        ws = [w for w in p.subject_words if w not in ("status", "state")]
        return tuple(ws)

    readers: dict[tuple[str, tuple[str, ...]], list[ToolProfile]] = {}
    setters: dict[tuple[str, tuple[str, ...]], list[ToolProfile]] = {}
    for p in universe:
        if p.verb in ("get", "check", "read") and not p.required and key(p):
            readers.setdefault((p.source, key(p)), []).append(p)
        elif p.is_setter and key(p):
            setters.setdefault((p.source, key(p)), []).append(p)
    for t in subjects:
        k = (t.source, key(t))
        state = " ".join(k[1])
        if t.is_setter:
            partners, role, reason = (
                readers.get(k, []),
                "setter",
                f"read the current {state} before changing it",
            )
        elif t.verb in ("get", "check", "read") and not t.required:
            partners, role = setters.get(k, []), "reader"
            reason = f"change {state} if the reading is not what is needed"
        else:
            continue
        for partner in partners:
            yield inferred_edge(
                t,
                partner,
                EdgeKind.TOOL_INDIRECTLY_DEPENDS_ON,
                None,
                reason,
                f"setter/reader pair on {state!r}",
                f"state_pair_rule/{role}",
            )


def _connectivity_reader(universe: Sequence[ToolProfile]) -> ToolProfile | None:
    scored = []
    for p in universe:
        if not p.status_capability:
            continue
        text = set(p.name_words) | set(words(p.description))
        hits = len(text & _CONNECTIVITY_WORDS)
        if hits:
            scored.append((hits + 0.5 * (p.kind == "core"), p))
    if not scored:
        return None
    scored.sort(key=lambda sp: (-sp[0], sp[1].id))
    return scored[0][1]


def _says_online(t: ToolProfile) -> frozenset[str]:
    return frozenset((set(t.name_words) | set(words(t.description))) & _NETWORK_WORDS)


def _network_users(
    universe: Sequence[ToolProfile], *, prior: bool
) -> tuple[ToolProfile, Callable[[ToolProfile], bool]] | None:
    """The connectivity reader and who may depend on it, or ``None``: no reader, or (``prior``) the
    fleet does not show the prior (at most ``FLEET_PRIOR_SHARE`` of its tools mention the network)."""
    reader = _connectivity_reader(universe)
    if reader is None:
        return None

    def dependent(t: ToolProfile) -> bool:
        return not (t.id == reader.id or t.kind == "core" or t.status_capability or t.is_ambient)

    fleet = [t for t in universe if dependent(t)]
    if prior and sum(1 for t in fleet if _says_online(t)) <= FLEET_PRIOR_SHARE * len(fleet):
        return None
    return reader, dependent


def connectivity_rule(
    subjects: Sequence[ToolProfile], universe: Sequence[ToolProfile]
) -> Iterator[DependencyEdge]:
    """A tool whose own text says it uses the network needs it up: the connectivity reader comes first.

    Evidence of the tool itself; the fleet-wide default is ``connectivity_prior_rule``.
    """
    return _network_edges(subjects, universe, prior=False)


def connectivity_prior_rule(
    subjects: Sequence[ToolProfile], universe: Sequence[ToolProfile]
) -> Iterator[DependencyEdge]:
    """In a fleet that shows it, the other (non-local) tools need the network too: a weak prior whose
    calibrated confidence decides whether retrieval may use it. A fleet where at most
    ``FLEET_PRIOR_SHARE`` of the tools mention the network gets none, whatever its tools are called."""
    return _network_edges(subjects, universe, prior=True)


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
            reason, evidence = "most tools of this fleet use the network", "fleet prior"
        else:
            reason = "uses the network"
            evidence = f"network words {sorted(said)[:4]}" + (" (authentication)" if t.is_auth else "")
        yield inferred_edge(
            t,
            reader,
            EdgeKind.TOOL_DIRECTLY_DEPENDS_ON,
            None,
            f"{reason}; {reader.id} tells whether it is up",
            evidence,
            "connectivity_prior_rule" if prior else "connectivity_rule",
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
