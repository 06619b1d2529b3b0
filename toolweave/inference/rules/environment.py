"""Environment rules: capability status checks, read/change pairs of one state, and connectivity."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator, Sequence

from toolweave.inference.producers import ToolProfile
from toolweave.inference.rules.base import (
    GOES_WITH,
    NEEDS,
    EdgeText,
    Rule,
    Scope,
    best_allowed,
    tool_key,
)
from toolweave.inference.text import words, wordset
from toolweave.inference.universe import group_by
from toolweave.records import DependencyEdge

__all__ = [
    "FLEET_PRIOR_SHARE",
    "capability_rule",
    "connectivity_prior_rule",
    "connectivity_rule",
    "state_pair_rule",
]

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
        best = best_allowed(t, cands, scope)
        if best is not None:
            yield _CAPABILITY.edge(t, best, cap=" ".join(best.status_capability))


_CAPABILITY = EdgeText(
    "capability_rule", NEEDS, "needs {cap} to be on; {p} reports whether it is", "tool name mentions {cap!r}"
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


_STATE_PAIR = EdgeText("state_pair_rule", GOES_WITH, "{why}", "setter/reader pair on {state!r}")
state_pair_rule = Rule(
    "state_pair_rule",
    _state_pair,
    wants=lambda t: tool_key((t.source, _state(t)), _state_role(t) is not None),
    offers=lambda p: tool_key((p.source, _state(p)), _state_role(p) is not None),
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
    return tool_key("network", _reader_score(p) > 0)  # type: ignore[return-value]


_ONLINE = EdgeText("connectivity_rule", NEEDS, "uses the network; {p} tells whether it is up", "{why}")
_ONLINE_PRIOR = EdgeText(
    "connectivity_prior_rule",
    NEEDS,
    "most tools of this fleet use the network; {p} tells whether it is up",
    "fleet prior",
)
connectivity_rule = Rule("connectivity_rule", _connectivity, wants=_anyone, offers=_may_read_network)
connectivity_prior_rule = Rule(
    "connectivity_prior_rule", _connectivity_prior, wants=_anyone, offers=_may_read_network
)
