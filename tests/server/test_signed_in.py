"""A session that holds a service's credential is walked no login of it (in process: real registry and
embedder, an in-test backend): a login or a tool taking a credential that answered without an error
signs the session in, a failed call does not, and the find cache keeps the two apart."""

from __future__ import annotations

from typing import Any

import pytest
from mcp import Client

from tests.edges import edge
from toolweave.server.gateway import Gateway

from .helpers import FakeBackend, fake_backends, tool
from .test_gateway import make_gateway, structured

pytestmark = pytest.mark.anyio

LOGIN = "travel__authenticate_travel"
TEXT = {"type": "string"}


def travel() -> FakeBackend:
    tools = [
        tool(
            "travel",
            "authenticate_travel",
            "Log in to the travel service with the client's id and secret; returns an access token.",
            {"client_id": TEXT, "client_secret": TEXT},
        ),
        tool(
            "travel",
            "book_flight",
            "Book a flight ticket to a destination city on a date.",
            {"access_token": TEXT, "destination": TEXT, "date": TEXT},
            ["access_token", "destination"],
        ),
        tool(
            "travel",
            "get_nearest_airport",
            "The nearest airport to a city.",
            {"city": TEXT},
        ),
    ]
    return FakeBackend("travel", tools)


# what the auth rule infers for such a fleet (``inference.rules.auth``), at its calibrated confidence
LOGIN_EDGE = edge("travel__book_flight", LOGIN, "access_token", origin="inferred", confidence=0.935)


async def walked_logins(client: Client, query: str) -> list[str]:
    found = await client.call_tool("find_tools", {"query": query, "k": 3, "detail": True})
    return [
        t["name"] for t in structured(found)["tools"] if t["reason"] == "dependency" and "auth" in t["name"]
    ]


async def start(gateway: Gateway) -> None:
    for backend in fake_backends(gateway):
        await backend.reported.wait()


async def test_a_session_holding_the_credential_walks_no_login(registry: Any) -> None:
    backend = travel()
    gateway = make_gateway(registry, backend)
    async with Client(gateway.server, mode="legacy") as client:
        await start(gateway)
        registry.add_edges([LOGIN_EDGE])
        assert await walked_logins(client, "book a flight ticket to Paris") == [LOGIN]
        # a call that took no credential shows nothing; a failed one neither
        await client.call_tool("travel__get_nearest_airport", {"city": "Paris"})
        backend.behaviour = "raise"
        await client.call_tool("travel__book_flight", {"access_token": "t0k3n", "destination": "Paris"})
        backend.behaviour = "answer"
        assert await walked_logins(client, "book a flight ticket to Rome") == [LOGIN]
        await client.call_tool("travel__book_flight", {"access_token": "t0k3n", "destination": "Paris"})
        # the same request again is not answered from the cache of the session before it signed in
        assert await walked_logins(client, "book a flight ticket to Rome") == []
        session = next(iter(gateway.sessions))
        assert session.signed_in == {"travel"}
        assert session.state()["signed_in"] == ["travel"]  # another replica reads it too

    # another session has not signed in
    async with Client(gateway.server, mode="legacy") as other:
        assert await walked_logins(other, "book a flight ticket to Rome") == [LOGIN]
