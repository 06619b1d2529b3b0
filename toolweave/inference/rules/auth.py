"""Authentication rules: credentials come from a login or token tool of the same service."""

from __future__ import annotations

from collections.abc import Hashable, Iterator, Sequence

from toolweave.inference.producers import AUTH_WORDS, ToolProfile
from toolweave.inference.rules.base import (
    AUTH_PARAM_WORDS,
    DIRECT,
    NEEDS,
    EdgeText,
    Rule,
    Scope,
    best_allowed,
    keyed_params,
    param_keys,
    param_words,
    tool_key,
)
from toolweave.inference.text import wordset
from toolweave.inference.universe import group_by
from toolweave.records import DependencyEdge

__all__ = ["auth_rule", "service_auth_rule"]


def _is_credential(pw: tuple[str, ...]) -> bool:
    """The value is a credential (session_id, access_token), not about a session (session_date) nor a
    count of tokens (``max_tokens`` of a language model)."""
    if not pw or _COUNTS.intersection(pw[:-1]):
        return False
    return pw[-1] in AUTH_PARAM_WORDS or (pw[-1] in ("id", "key") and "session" in pw)


_COUNTS = wordset("max min num number total count limit")


def _credential(pw: tuple[str, ...]) -> str | None:
    return "credential" if _is_credential(pw) else None


def _offers_credentials(p: ToolProfile) -> tuple[Hashable, ...]:
    return tool_key("credential", _is_auth_producer(p))


def _is_auth_producer(p: ToolProfile) -> bool:
    return (
        p.is_auth
        or any(w in AUTH_PARAM_WORDS for w in p.outputs)
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
    for t, param, pw, _credential_key in keyed_params(subjects, _credential, scope):
        pname = "_".join(pw)
        scored: list[tuple[float, ToolProfile]] = []
        generic: list[tuple[float, ToolProfile]] = []
        for p in producers:
            if p.id == t.id or param in p.params or (p.source != t.source and not p.outputs):
                continue
            overlap = len(p.service_words & set(t.name_words))
            exact = pname in p.outputs or pw[-1] in p.outputs
            named = bool(set(pw) & set(p.name_words))
            if p.service_words and not overlap and not exact:
                continue  # another service's login
            score = 3.0 * exact + 2.0 * overlap + 1.0 * p.is_auth + 1.0 * named + 0.5 * (p.source == t.source)
            # a login that names no service and is not seen to return this credential
            (generic if not p.service_words and not exact else scored).append((score, p))
        if len(generic) == 1:  # the fleet's one login; several ("user_authenticate", "get_api_tokens", …
            scored += generic  # in a catalog of many APIs) are any API's, none is this tool's
        best = best_allowed(t, scored, scope)
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


_AUTH = EdgeText("auth_rule", DIRECT, "{param} is issued by authenticating with {p}", "{why}")
auth_rule = Rule(
    "auth_rule",
    _auth,
    wants=lambda t: param_keys(t, _credential),
    offers=_offers_credentials,
)


def _offers_login(p: ToolProfile) -> tuple[Hashable, ...]:
    return tool_key(p.source, p.is_auth and bool(p.service_words))  # a login only serves its own source


def _needs_service_login(t: ToolProfile) -> bool:
    # a login, a reader of the login status, or a tool taking a credential (auth_rule's) needs no login edge
    about_login = bool(AUTH_WORDS.intersection(t.name_words))
    return not (about_login or any(AUTH_PARAM_WORDS.intersection(param_words(p)) for p in t.params))


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
        best = best_allowed(t, cands, scope)
        if best is not None:
            yield _SERVICE_AUTH.edge(t, best, service=sorted(best.service_words))


_SERVICE_AUTH = EdgeText(
    "service_auth_rule",
    NEEDS,
    "tools of this service need a login first ({p})",
    "shared service name {service}",
)
service_auth_rule = Rule(
    "service_auth_rule",
    _service_auth,
    wants=lambda t: tool_key(t.source, _needs_service_login(t)),
    offers=_offers_login,
)
