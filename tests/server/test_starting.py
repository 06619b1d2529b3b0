"""Calls during start-up (``server/turns/starting.py``): answered within ``startup_call_wait_s`` with a
request to call again, never cut once the gateway is warm; both protocol eras, real registry and embedder."""

from __future__ import annotations

import threading
import time
from typing import Any

import anyio
import pytest
from mcp import Client

from tests.meta import request_meta
from tests.results import text
from toolweave.registry import Registry
from toolweave.server.fronts.early import ARRIVED_META
from toolweave.server.gateway import Gateway
from toolweave.server.turns.starting import answer_find_tools_while_starting, starting
from toolweave.settings import Settings

from .helpers import FakeBackend, call_held_by_start_up, time_tools
from .test_startup import held_opener

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_call_during_start_up_is_answered_within_the_bound(registry: Registry, mode: str) -> None:
    opened = threading.Event()
    clock = FakeBackend("clock", time_tools())
    settings = Settings(home=registry.path, startup_call_wait_s=0.5)
    gateway = Gateway(held_opener(registry, opened), [clock], settings)
    answer_find_tools_while_starting(gateway)
    try:
        async with Client(gateway.server, mode=mode) as client:
            assert starting(gateway)
            began = time.monotonic()
            early = await client.call_tool("find_tools", {"query": "what time is it in Tokyo"})
            waited = time.monotonic() - began
            assert waited < 30  # the registry never opened: without the bound this would hang
            # an answer with nothing found yet (not an error: pydantic-ai counts those)
            assert not early.is_error and early.structured_content is not None
            assert early.structured_content["tools"] == []
            assert early.structured_content["note"].startswith("the gateway is still starting")
            assert "call find_tools again" in early.structured_content["note"]
            # a proxied call is never dropped (its upstream may have run it): it waits for start-up
            called = await call_held_by_start_up(client, 1.0, opened.set)  # twice the bound
            assert not called.is_error and clock.calls == [("get_current_time", {"timezone": "Asia/Tokyo"})]
            with anyio.fail_after(60):
                await gateway.warmed.wait()
            assert not starting(gateway)
            found = await client.call_tool("find_tools", {"query": "what time is it in Tokyo"})
            assert not found.is_error, text(found)
            assert found.structured_content is not None
            assert found.structured_content["tools"][0]["name"] == "clock__get_current_time"
    finally:
        opened.set()


async def test_a_warm_gateway_is_never_cut(registry: Registry) -> None:
    clock = FakeBackend("clock", time_tools())
    settings = Settings(home=registry.path, startup_call_wait_s=0.001)
    gateway = Gateway(registry, [clock], settings)
    answer_find_tools_while_starting(gateway)
    async with Client(gateway.server, mode="legacy") as client:
        with anyio.fail_after(60):
            await gateway.warmed.wait()
            await clock.reported.wait()
        assert not starting(gateway)
        found = await client.call_tool("find_tools", {"query": "what time is it in Tokyo"})
    assert found.structured_content is not None and found.structured_content["tools"], found


async def test_zero_turns_the_bound_off(registry: Registry) -> None:
    settings = Settings(home=registry.path, startup_call_wait_s=0)
    gateway = Gateway(registry, [], settings)
    handler: Any = gateway.server.get_request_handler("tools/call")
    answer_find_tools_while_starting(gateway)
    assert gateway.server.get_request_handler("tools/call") is handler


async def test_the_bound_counts_from_the_arrival_the_early_front_stamped(registry: Registry) -> None:
    """A find_tools the early front kept while the SDK loaded has waited already: the client's own
    timeout started when it sent it, so what is left of the bound is all it gets."""
    opened = threading.Event()
    settings = Settings(home=registry.path, startup_call_wait_s=30)
    gateway = Gateway(held_opener(registry, opened), [], settings)
    answer_find_tools_while_starting(gateway)
    try:
        async with Client(gateway.server, mode="legacy") as client:
            began = time.monotonic()
            waited = request_meta({ARRIVED_META: time.monotonic() - 29.5})  # kept 29.5 s of the 30 s bound
            early = await client.call_tool("find_tools", {"query": "what time is it in Tokyo"}, meta=waited)
            took = time.monotonic() - began
        assert early.structured_content is not None and early.structured_content["tools"] == []
        assert took < 25  # half a second was left, not the whole bound
    finally:
        opened.set()


async def test_a_search_waiting_for_the_embedding_model_is_answered_within_the_bound(
    registry: Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The registry is open but the model still loads (slow on a busy machine): the search's worker
    thread waits for it, and the bound must answer anyway (a thread cannot be cancelled, only left)."""
    loaded = threading.Event()
    embedder = registry.embedder
    for name in ("embed_query", "embed_queries"):
        original = getattr(embedder, name)

        def held(*args: Any, _original: Any = original, **kwargs: Any) -> Any:
            loaded.wait(60)
            return _original(*args, **kwargs)

        monkeypatch.setattr(embedder, name, held)
    settings = Settings(home=registry.path, startup_call_wait_s=0.5)
    gateway = Gateway(registry, [], settings)
    answer_find_tools_while_starting(gateway)
    release = threading.Timer(20, loaded.set)  # never hang the suite, whatever the code does
    release.start()
    try:
        async with Client(gateway.server, mode="legacy") as client:
            with anyio.fail_after(30):
                await gateway.served.ready.wait()
            assert starting(gateway) and not gateway.warmed.is_set()
            began = time.monotonic()
            early = await client.call_tool("find_tools", {"query": "what time is it in Tokyo"})
            took = time.monotonic() - began
            assert early.structured_content is not None and early.structured_content["tools"] == []
            assert "still starting" in early.structured_content["note"]
            assert took < 15  # the bound answered, not the model's load (released at 20 s)
            loaded.set()  # the warm-up may finish: the client leaves without waiting for the timer
    finally:
        release.cancel()
        loaded.set()
