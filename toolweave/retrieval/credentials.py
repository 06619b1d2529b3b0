"""A credential the request already holds needs no login: the walk does not add one.

An inferred login edge is true more often than any other kind (``auth_rule`` 0.935 on the gold graphs): a
tool taking an ``access_token`` does get it from its service's login. But a true edge is a prerequisite of
the *session*, not of every request: a user who writes "book it, my access token is 'abc123xyz'" (BFCL
multi-turn), "my token is "abcd1234"" (ToolAlpaca) or "the session ID is 'abc123'" (Seal-Tools) has logged
in already, and the login the walk would put right after the hit is a tool nobody calls, ahead of the
request's own tools. So when a request states a credential *value* (a credential noun followed by a value:
a quoted string, or a word of four characters or more with a digit that is not a bare number), the walk
follows no inferred edge into a credential: none feeding a credential parameter (``access_token``,
``session_id``, ``api_key``), none to a login tool (``service_auth_rule``'s parameterless "this service
needs its login"). A password is not such a value: it is what a login *takes* ("my password is …, reset
it" asks for the login). Declared, manifest and learned edges are walked as they are (someone's word, or
what traffic showed).

A session tells the same thing without the words: once a login, or a tool that takes a credential, has
answered it without an error, the session holds that service's credential (``signs_in``), and the walk
follows no inferred edge into a credential from that service's tools (``signed_in_filter``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

from toolweave.names import name_of, name_words
from toolweave.records import DependencyEdge

__all__ = [
    "CREDENTIAL_WORDS",
    "LOGIN_WORDS",
    "credential_parameter",
    "holds_credential",
    "into_credential",
    "signed_in_filter",
    "signs_in",
    "without_credentials",
]

CREDENTIAL_WORDS = frozenset({"token", "tokens", "jwt", "bearer"})
"""Last words of a parameter that carries a credential by itself (``access_token``, ``jwt``)."""

_QUALIFIED = frozenset({"key", "code", "id", "secret"})
"""Last words that carry a credential only after a credential qualifier (``session_id``, ``api_key``; not
``user_id`` nor ``zip_code``)."""

_QUALIFIERS = frozenset({"session", "api", "access", "auth", "authorization", "authentication", "secret"})

LOGIN_WORDS = frozenset({"login", "logon", "signin", "authenticate", "authentication", "authorize", "auth"})
"""Words of a tool name that make it a login (``ticket_login``, ``authenticate_travel``)."""

_NOUN = (
    r"(?:(?:access|auth|authentication|authorization|api|bearer|session|refresh|secret)[\s_-]+"
    r"(?:token|key|code|id)|tokens?|jwt)"
)
_VALUE = r"""(?:['"`][^'"`\s]{3,}['"`]|(?=[\w-]*\d)(?!\d+(?![\w-]))[\w-]{4,}(?![\w-]))"""
_HELD = re.compile(rf"\b{_NOUN}\b\s*(?:(?:is|was|of|=|:|,)\s*)?{_VALUE}", re.IGNORECASE)


def holds_credential(request: str) -> bool:
    """Whether ``request`` states a credential value: "my access token is 'abc123xyz'", "new access token:
    2278-9812-3456-4567", "session ID is 'abc123'"; not "reset my password", "summarise in 2048 tokens"
    or "which token do I need?"."""
    return _HELD.search(request) is not None


def credential_parameter(name: str) -> bool:
    """Whether a parameter named ``name`` carries a credential: ``access_token``, ``jwt``, ``session_id``,
    ``api_key``; not ``user_id`` nor ``zip_code``."""
    words = name_words(name).split()
    if not words:
        return False
    last = words[-1]
    return last in CREDENTIAL_WORDS or (last in _QUALIFIED and bool(_QUALIFIERS.intersection(words[:-1])))


def is_login(tool_id: str) -> bool:
    """Whether the tool ``tool_id`` names is a login (``ticket_login``, ``authenticate_travel``)."""
    return bool(LOGIN_WORDS.intersection(name_words(name_of(tool_id)).split()))


def into_credential(edge: DependencyEdge) -> bool:
    """Whether ``edge`` is an inferred edge into a credential: it feeds a credential parameter, or it has
    no parameter and its dependency is a login tool."""
    if edge.origin != "inferred":
        return False
    if edge.parameter_name is None:
        return is_login(edge.depends_on)
    return credential_parameter(edge.parameter_name)


def signs_in(tool_id: str, input_schema: Mapping[str, Any]) -> bool:
    """Whether a call of this tool that succeeded shows its session holds the service's credential: the
    tool is a login, or it takes a credential parameter (a search that needs none shows nothing)."""
    properties = input_schema.get("properties")
    return is_login(tool_id) or (
        isinstance(properties, Mapping) and any(credential_parameter(str(p)) for p in properties)
    )


def without_credentials(edges: Sequence[DependencyEdge]) -> list[DependencyEdge]:
    """``edges`` less those into a credential (``into_credential``)."""
    return [e for e in edges if not into_credential(e)]


def signed_in_filter(
    signed_in: Collection[str], source_of: Callable[[str], str | None]
) -> Callable[[Sequence[DependencyEdge]], list[DependencyEdge]]:
    """A filter of a tool's edges that drops those into a credential (``into_credential``) from a tool of
    a source in ``signed_in``: the session holds that service's credential already."""

    def kept(edges: Sequence[DependencyEdge]) -> list[DependencyEdge]:
        return [e for e in edges if not (into_credential(e) and source_of(e.tool) in signed_in)]

    return kept
