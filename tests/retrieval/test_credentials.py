"""A request that states a credential value, or a session that holds one, walks no inferred login
(``retrieval.credentials``)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from tests.retrieval.test_pipeline import WordIndex
from toolweave.records import DependencyEdge, EdgeKind
from toolweave.retrieval.credentials import (
    holds_credential,
    into_credential,
    signed_in_filter,
    signs_in,
)
from toolweave.retrieval.pipeline import retrieve
from toolweave.settings import RetrievalSettings


@pytest.mark.parametrize(
    "request_text",
    [
        "Book it. I'll be using my access token 'abc123xyz' and my Mastercard.",
        "My access token is abc123xyz if you need.",
        "I have received my new access token: 2278-9812-3456-4567.",
        "I'll use my designated access code, 12345-67890.",
        'Update my profile, my token is "abcd1234".',
        "The session ID is 'abc123' and the participants are Ann and Bo.",
        "Use the api key sk-live-42abc for it.",
    ],
)
def test_a_stated_credential_value_is_held(request_text: str) -> None:
    assert holds_credential(request_text)


@pytest.mark.parametrize(
    "request_text",
    [
        "I forgot my password, can you help me reset it? My password is Secret123.",  # a login's input
        "Summarise the report in 2048 tokens.",  # a count, not a value
        "Which token do I need for the upload?",
        "Now that we're all authenticated, book the flight.",
        "Send it to zip code 94107-1234.",  # a code, but no credential
        "Cancel the booking with id 4521.",
    ],
)
def test_no_credential_value_is_held(request_text: str) -> None:
    assert not holds_credential(request_text)


def _edge(parameter: str | None, producer: str, origin: str = "inferred") -> DependencyEdge:
    kind = EdgeKind.PARAMETER_DIRECTLY_DEPENDS_ON if parameter else EdgeKind.TOOL_DIRECTLY_DEPENDS_ON
    return DependencyEdge(
        tool="t__book_flight", depends_on=producer, kind=kind, parameter_name=parameter, origin=origin
    )


def test_edges_into_a_credential() -> None:
    assert into_credential(_edge("access_token", "t__authenticate_travel"))
    assert into_credential(_edge("sessionId", "t__open_session"))
    assert into_credential(_edge("api_key", "t__get_key"))
    assert into_credential(_edge(None, "t__ticket_login"))  # "this service needs its login"
    assert not into_credential(_edge("user_id", "t__get_user_id"))
    assert not into_credential(_edge("zip_code", "t__get_zipcode"))
    assert not into_credential(_edge(None, "t__get_weather"))
    # someone's word (declared, manifest) or what traffic showed (learned) is walked as it is
    assert not into_credential(_edge("access_token", "t__authenticate_travel", origin="declared"))
    assert not into_credential(_edge("access_token", "t__authenticate_travel", origin="learned"))


DOCS = {
    "t__book_flight": "book flight ticket",
    "t__authenticate_travel": "authenticate travel account login",
    "t__get_flight_cost": "flight cost estimate",
}
EDGES = {
    "t__book_flight": [
        DependencyEdge(
            tool="t__book_flight",
            depends_on="t__authenticate_travel",
            kind=EdgeKind.PARAMETER_DIRECTLY_DEPENDS_ON,
            parameter_name="access_token",
            origin="inferred",
            confidence=0.935,
        ),
        DependencyEdge(
            tool="t__book_flight",
            depends_on="t__get_flight_cost",
            kind=EdgeKind.TOOL_DIRECTLY_DEPENDS_ON,
            origin="inferred",
            confidence=0.9,
        ),
    ]
}


def deps(tool: str, kinds: Sequence[EdgeKind] | None) -> list[DependencyEdge]:
    return [e for e in EDGES.get(tool, []) if kinds is None or e.kind in kinds]


def _walked(text: str, context: Sequence[str] = (), signed_in: frozenset[str] = frozenset()) -> list[str]:
    index = WordIndex(DOCS, {t: "t" for t in DOCS})
    params = RetrievalSettings(method="grtf", top_k=1, final_k=5)
    ranked = retrieve(
        text, index, deps, params, context=context, signed_in=signed_in, source_of=lambda t: "t"
    )
    return [r.tool_id for r in ranked if r.reason == "dependency"]


def test_the_walk_adds_no_login_when_the_request_holds_the_token() -> None:
    assert _walked("book flight ticket") == ["t__authenticate_travel", "t__get_flight_cost"]
    # logged in already: the login is nobody's next step; the other prerequisite still is
    assert _walked("book flight ticket, my access token is 'abc123xyz'") == ["t__get_flight_cost"]
    # a short follow-up ranked with the turn that gave the token holds it too
    assert _walked("book flight", context=["my access token is 'abc123xyz'"]) == ["t__get_flight_cost"]


def _schema(*names: str) -> dict[str, object]:
    return {"type": "object", "properties": {n: {"type": "string"} for n in names}}


def test_a_call_that_signs_in() -> None:
    assert signs_in("travel__authenticate_travel", _schema("client_id", "client_secret"))
    assert signs_in("travel__book_flight", _schema("access_token", "travel_class"))
    assert signs_in("chat__post", _schema("sessionId", "text"))
    # a tool that takes no credential shows nothing about the session's login
    assert not signs_in("travel__get_flight_cost", _schema("travel_from", "travel_to"))
    assert not signs_in("users__get_user", _schema("user_id"))
    assert not signs_in("odd__tool", {"type": "object", "properties": ["access_token"]})


def test_a_signed_in_source_keeps_every_edge_but_its_logins() -> None:
    login, cost = EDGES["t__book_flight"]
    other = login.model_copy(update={"tool": "u__book_hotel"})
    declared = login.model_copy(update={"origin": "declared"})
    keep = signed_in_filter({"t"}, lambda tool: tool.partition("__")[0])
    assert keep([login, cost, other, declared]) == [cost, other, declared]
    assert signed_in_filter(set(), lambda tool: "t")([login, cost]) == [login, cost]


def test_the_walk_adds_no_login_for_a_signed_in_source() -> None:
    assert _walked("book flight ticket", signed_in=frozenset({"t"})) == ["t__get_flight_cost"]
    # another service's session is no login of this one
    assert _walked("book flight ticket", signed_in=frozenset({"u"})) == [
        "t__authenticate_travel",
        "t__get_flight_cost",
    ]
