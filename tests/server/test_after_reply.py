"""What a successful call teaches is learned after its reply (``server/calls/after_reply.py``), in process
(real registry + embedder, in-test backends): the stdio relay writes its answer line before the traffic
observer runs, the observer and the usage examples still get every call, sequential calls share one
worker task, and a stop learns what was still queued before the registry's last flush."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest
from mcp import Client

from tests.registry.demo import stored_examples
from toolweave.server.calls.after_reply import MAX_PENDING, AfterReply
from toolweave.server.fronts.relay import CallRelay
from toolweave.server.gateway import Gateway

from .helpers import FakeBackend, fake_backends, notes_tools, time_tools
from .test_gateway import make_gateway

pytestmark = pytest.mark.anyio

TIME = "clock__get_current_time"
REQUEST = "what time is it in Tokyo"


class Wire:
    """The relay's answer lines, as the client's pipe would get them."""

    def __init__(self) -> None:
        self.lines: list[dict[str, Any]] = []

    async def write(self, text: str) -> None:
        self.lines.append(json.loads(text))

    async def answers(self, count: int) -> list[dict[str, Any]]:
        with anyio.fail_after(20):
            while len(self.lines) < count:
                await anyio.sleep(0.01)
        return self.lines


@asynccontextmanager
async def relaying(gateway: Gateway, wire: Wire) -> AsyncIterator[Any]:
    """A gateway whose stdio relay serves the lines sent on the yielded stream, answering on ``wire``; the
    SDK path served one ``find_tools`` first (the relay serves a client the SDK path knows)."""
    relay = CallRelay(gateway)
    send, receive = anyio.create_memory_object_stream[str](16)
    async with (
        send,
        receive,
        Client(gateway.server, mode="legacy") as client,
        relay.serving(receive, wire) as others,
    ):
        for backend in fake_backends(gateway):
            with anyio.fail_after(20):
                await backend.reported.wait()
        await client.call_tool("find_tools", {"query": REQUEST, "k": 3})  # the relay learns the client
        async with anyio.create_task_group() as tg:

            async def drain() -> None:  # lines the relay does not serve: none here
                async for line in others:
                    raise AssertionError(f"not relayed: {line}")

            tg.start_soon(drain)
            yield send
            tg.cancel_scope.cancel()


def call_line(request_id: int, timezone: str) -> str:
    params = {"name": TIME, "arguments": {"timezone": timezone}}
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params})


@pytest.fixture
def gateway(registry: Any) -> Gateway:
    return make_gateway(registry, FakeBackend("clock", time_tools()), FakeBackend("notes", notes_tools()))


async def test_the_relay_writes_the_answer_before_the_observer_runs(gateway: Gateway) -> None:
    observed: list[tuple[str, dict[str, Any], int]] = []
    observe, wire = gateway.calls.traffic.observe, Wire()

    def watched(session_key: str, tool: str, arguments: Any, *rest: Any, **options: Any) -> Any:
        observed.append((tool, dict(arguments), len(wire.lines)))  # answers written by then
        return observe(session_key, tool, arguments, *rest, **options)

    gateway.calls.traffic.observe = watched  # type: ignore[method-assign]
    async with relaying(gateway, wire) as lines:
        await lines.send(call_line(7, "Asia/Tokyo"))
        [answer] = await wire.answers(1)
        assert answer["id"] == 7 and not answer["result"].get("isError"), answer
        with anyio.fail_after(20):
            while not observed:
                await anyio.sleep(0.01)
    # the observer saw the call, with its arguments, once the answer line was out (before: 0 lines)
    assert observed == [(TIME, {"timezone": "Asia/Tokyo"}, 1)]


async def test_sequential_relayed_calls_share_one_worker_and_are_all_learned(
    gateway: Gateway, registry: Any
) -> None:
    tasks: list[asyncio.Task[Any] | None] = []
    serve_call, wire = gateway.serve_call, Wire()

    async def watched(*args: Any, **kwargs: Any) -> Any:
        tasks.append(asyncio.current_task())
        return await serve_call(*args, **kwargs)

    async with relaying(gateway, wire) as lines:
        gateway.serve_call = watched  # type: ignore[method-assign]
        for n, zone in enumerate(["Asia/Tokyo", "Europe/Paris", "America/Lima"], start=1):
            await lines.send(call_line(n, zone))
            await wire.answers(n)
        assert [a["id"] for a in wire.lines] == [1, 2, 3]
        assert len(tasks) == 3 and len(set(map(id, tasks))) == 1  # no task per call (before: 3)
        assert not gateway.calls.after_reply  # each learned right after its answer
        assert registry.flush_observations()  # what the flusher does on its cadence
    assert stored_examples(registry.path, TIME) == [REQUEST]


async def test_a_stop_learns_what_was_still_queued_before_the_last_flush(
    gateway: Gateway, registry: Any
) -> None:
    async with Client(gateway.server, mode="legacy") as client:
        for backend in fake_backends(gateway):
            with anyio.fail_after(20):
                await backend.reported.wait()
        await client.call_tool("find_tools", {"query": REQUEST, "k": 3})
        session = next(iter(gateway.sessions))
        # a call whose reply nobody reported written yet (its wire ends with the gateway)
        assert not (await gateway.calls.call(session, TIME, {"timezone": "UTC"})).is_error
        assert len(gateway.calls.after_reply) == 1
    # the stop ran the queue before the registry's last flush (here the test's own registry: flushed here)
    assert not gateway.calls.after_reply
    assert registry.flush_observations()
    assert stored_examples(registry.path, TIME) == [REQUEST]


def test_the_queue_keeps_order_and_bounds_itself() -> None:
    learned: list[int] = []
    queue: AfterReply[int] = AfterReply(learned.append)
    for n in range(MAX_PENDING + 3):  # replies never reported written
        queue.add(n)
    assert learned == [0, 1, 2] and len(queue) == MAX_PENDING  # the oldest learned without waiting
    queue.run()
    assert learned == list(range(MAX_PENDING + 3)) and not queue


def test_a_failing_lesson_costs_only_itself() -> None:
    learned: list[int] = []

    def learn(n: int) -> None:
        if n == 1:
            raise ValueError("a bug in learning")
        learned.append(n)

    queue: AfterReply[int] = AfterReply(learn)
    for n in range(3):
        queue.add(n)
    queue.run()
    assert learned == [0, 2]
