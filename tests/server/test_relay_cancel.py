"""A client's ``notifications/cancelled`` for a relayed call (``server/fronts/relay.py``), in process
(real registry + embedder, in-test backends): the calls a worker serves share one cancel scope until a
cancel ends one, so a cancelled call is never answered, its cancellation reaches no later call, and a
call cancelled before its worker woke is cancelled too; a stop still answers "Connection closed"."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import anyio
import pytest
from mcp import Client

from toolweave.server.fronts.relay import CallRelay
from toolweave.server.gateway import Gateway

from .helpers import FakeBackend, fake_backends
from .test_after_reply import REQUEST, TIME, Wire, call_line, gateway

pytestmark = pytest.mark.anyio

__all__ = ["gateway"]  # the fixture, shared with test_after_reply


def cancel_line(request_id: int) -> str:
    params = {"requestId": request_id, "reason": "the user gave up"}
    return json.dumps({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": params})


@asynccontextmanager
async def taking(gateway: Gateway, wire: Wire) -> AsyncIterator[Callable[[str], bool]]:
    """The relay's line taker for a client the SDK path served once (a ``find_tools``)."""
    relay = CallRelay(gateway)
    async with Client(gateway.server, mode="legacy") as client, relay.taking(wire) as take:
        for backend in fake_backends(gateway):
            with anyio.fail_after(20):
                await backend.reported.wait()
        await client.call_tool("find_tools", {"query": REQUEST, "k": 3})
        yield take


def clock(gateway: Gateway) -> FakeBackend:
    return next(b for b in fake_backends(gateway) if b.name == "clock")


async def upstream_called(backend: FakeBackend) -> None:
    """Until a relayed call has reached ``backend``."""
    with anyio.fail_after(20):
        while not backend.calls:
            await anyio.sleep(0.01)


async def test_a_cancelled_call_is_not_answered_and_the_worker_serves_on(gateway: Gateway) -> None:
    wire, backend = Wire(), clock(gateway)
    async with taking(gateway, wire) as take:
        backend.behaviour = "hang"
        assert take(call_line(1, "Asia/Tokyo"))
        await upstream_called(backend)  # the call waits on its upstream
        assert take(cancel_line(1))
        backend.behaviour = "answer"
        assert take(call_line(2, "Europe/Paris"))  # the same worker, past the cancelled call's scope
        [answer] = await wire.answers(1)
        assert answer["id"] == 2 and not answer["result"].get("isError"), answer
        assert take(call_line(3, "America/Lima"))  # and the next one after it
        await wire.answers(2)
        await anyio.sleep(0.2)
        assert [a["id"] for a in wire.lines] == [2, 3]  # never an answer to the cancelled call
        assert not take(cancel_line(1))  # answered or cancelled: no longer the relay's


async def test_a_call_cancelled_before_its_worker_woke_is_cancelled(gateway: Gateway) -> None:
    wire, backend = Wire(), clock(gateway)
    cancelled = gateway.metrics.calls.labels(TIME, "cancelled")
    async with taking(gateway, wire) as take:
        assert take(call_line(1, "Asia/Tokyo"))
        await wire.answers(1)  # a worker is idle now
        backend.behaviour = "hang"
        # the call and its cancel arrive in one loop turn: the worker has not started it yet
        assert take(call_line(2, "Europe/Paris")) and take(cancel_line(2))
        with anyio.fail_after(20):  # it ends at its first wait (the upstream's), as a cancelled call
            while not cancelled._value.get():
                await anyio.sleep(0.01)
        backend.behaviour = "answer"
        assert take(call_line(3, "America/Lima"))
        await wire.answers(2)
        await anyio.sleep(0.2)
        assert [a["id"] for a in wire.lines] == [1, 3]
    assert [arguments["timezone"] for _, arguments in backend.calls] == [
        "Asia/Tokyo",
        "Europe/Paris",
        "America/Lima",
    ]


async def test_a_stop_answers_a_call_in_flight_connection_closed(gateway: Gateway) -> None:
    wire, backend = Wire(), clock(gateway)
    async with taking(gateway, wire) as take:
        backend.behaviour = "hang"
        assert take(call_line(1, "Asia/Tokyo"))
        await upstream_called(backend)
    [answer] = wire.lines
    assert answer["id"] == 1 and answer["error"]["message"] == "Connection closed", answer
