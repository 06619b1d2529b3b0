"""Instant start, in process with a real registry and embedder, both protocol eras.

The handshake and ``tools/list`` are answered while the registry is not open yet and an upstream has
not connected; ``find_tools`` then waits for both and finds the upstream's tools; pinned tools arrive
with ``list_changed``; a registry that cannot be opened gives every ``find_tools``/call a clear error.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client

from toolweave.adapters.backend import ToolsCallback
from toolweave.registry import Registry
from toolweave.server.gateway import Gateway
from toolweave.settings import PublishSettings, Settings

from .helpers import FakeBackend, ListChanged, names, notes_tools, time_tools, watching

pytestmark = pytest.mark.anyio

MODES = ["legacy", "auto"]
META = ["find_tools", "call_tool"]


class HeldBackend(FakeBackend):
    """An upstream that has not connected yet: it reports its tools only once ``connect`` is set."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.connect = anyio.Event()

    async def run(self, on_tools: ToolsCallback) -> None:
        await self.connect.wait()
        await super().run(on_tools)


def held_opener(registry: Registry, opened: threading.Event) -> Callable[[], Registry]:
    """A registry opener that blocks (in the gateway's worker thread) until the test lets it open."""

    def open_registry() -> Registry:
        assert opened.wait(60), "the test never let the registry open"
        return registry

    return open_registry


def error_text(result: types.CallToolResult) -> str:
    assert result.is_error, result
    return "".join(c.text for c in result.content if isinstance(c, types.TextContent))


@pytest.mark.parametrize("mode", MODES)
async def test_handshake_and_list_do_not_wait_for_the_registry_or_upstreams(
    registry: Registry, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    opened = threading.Event()
    clock = HeldBackend("clock", time_tools())
    notes = FakeBackend("notes", notes_tools())
    settings = Settings(
        home=registry.path, publish=PublishSettings(pinned=["notes__create_note"]), connect_timeout_s=60
    )
    gateway = Gateway(held_opener(registry, opened), [clock, notes], settings)
    gated = anyio.Event()
    wait_ready = gateway._wait_ready

    async def spy(tool: str) -> types.CallToolResult | None:
        gated.set()  # the request reached the gateway's wait for the registry
        return await wait_ready(tool)

    monkeypatch.setattr(gateway, "_wait_ready", spy)
    watch = ListChanged()
    try:
        client = Client(gateway.server, mode=mode, message_handler=watch.on_message)
        async with client, watching(client, watch):
            # Answered while the registry is still opening: the meta-tools, nothing else yet.
            with anyio.fail_after(20):  # a list that waited for the registry would never come
                assert names(await client.list_tools(cache_mode="bypass")) == META
            assert not gateway.served.ready.is_set() and not clock.connect.is_set()

            async with anyio.create_task_group() as tg:
                found: list[types.CallToolResult] = []

                async def find() -> None:
                    query = {"query": "what time is it in Tokyo", "k": 3}
                    found.append(await client.call_tool("find_tools", query))

                tg.start_soon(find)
                with anyio.fail_after(20):
                    await gated.wait()
                opened.set()  # only now: find_tools is already waiting for the registry
                # The registry opens and the notes upstream reports: the pinned tool is announced.
                await watch.wait(30)
                with anyio.fail_after(30):
                    while "notes__create_note" not in (
                        listed := names(await client.list_tools(cache_mode="bypass"))
                    ):
                        await watch.wait(30)
                assert listed == [*META, "notes__create_note"]
                # find_tools still waits for the upstream on its first connection attempt ...
                assert not found
                clock.connect.set()
            # ... and, once it connected, finds its tools.
            result = found[0]
            assert not result.is_error, result
            assert result.structured_content is not None
            top = result.structured_content["tools"][0]
            assert top["name"] == "clock__get_current_time"
    finally:
        opened.set()


@pytest.mark.parametrize("mode", MODES)
async def test_a_registry_that_cannot_be_opened_gives_clear_errors(
    tmp_path: Path, embedder: Any, mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    not_a_registry = tmp_path / "elsewhere"
    not_a_registry.mkdir()
    (not_a_registry / "notes.txt").write_text("someone else's files")
    settings = Settings(home=not_a_registry)
    opener = partial(Registry.open, not_a_registry, embedder=embedder, settings=settings)
    notes = FakeBackend("notes", notes_tools())
    gateway = Gateway(opener, [notes], settings)
    caplog.set_level(logging.WARNING)
    async with Client(gateway.server, mode=mode) as client:
        assert names(await client.list_tools(cache_mode="bypass")) == META
        found = await client.call_tool("find_tools", {"query": "create a note"})
        message = error_text(found)
        assert message.startswith("unavailable: the tool registry could not be opened: NotARegistryError")
        assert str(not_a_registry) in message and "not a toolweave registry" in message
        called = await client.call_tool("call_tool", {"name": "notes__create_note", "arguments": {}})
        assert error_text(called) == message
        direct = await client.call_tool("notes__create_note", {"title": "x"})
        assert error_text(direct) == message
        # Still serving: the meta-tools are listed, nothing was called upstream.
        assert names(await client.list_tools(cache_mode="bypass")) == META
        for _ in range(3):  # every later call answers the same, and logs nothing more
            assert error_text(await client.call_tool("find_tools", {"query": "a note"})) == message
            assert error_text(await client.call_tool("notes__create_note", {"title": "x"})) == message
        assert notes.calls == []
    logged = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert any("could not be opened" in m and str(not_a_registry) in m for m in logged), logged
    # one line for the failure, not one (or a traceback) per call
    said = [
        r for r in caplog.records if r.levelno >= logging.WARNING and "could not be opened" in r.getMessage()
    ]
    assert len(said) == 1, [r.getMessage() for r in said]
    assert not [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING and r.exc_info]


@pytest.mark.parametrize("mode", MODES)
async def test_tools_known_from_an_earlier_run_are_found_while_their_upstream_connects(
    registry: Registry, mode: str
) -> None:
    """A busy machine's first turn does not wait for every upstream to start: an upstream still on its
    first connection attempt whose tools the registry holds is found at once, and a call of one of its
    tools waits for that first connection instead of failing."""
    registry.ingest("clock", time_tools(), [])  # an earlier run's
    clock = HeldBackend("clock", time_tools())
    gateway = Gateway(registry, [clock], Settings(home=registry.path, connect_timeout_s=60))
    async with Client(gateway.server, mode=mode) as client:
        with anyio.fail_after(20):  # waiting for the upstream would take the whole 15 s grace
            found = await client.call_tool("find_tools", {"query": "what time is it in Tokyo", "k": 3})
        assert not found.is_error, found
        assert found.structured_content is not None
        assert found.structured_content["tools"][0]["name"] == "clock__get_current_time"
        assert not clock.connect.is_set()
        async with anyio.create_task_group() as tg:
            answers: list[types.CallToolResult] = []

            async def call() -> None:
                answers.append(await client.call_tool("clock__get_current_time", {"timezone": "UTC"}))

            tg.start_soon(call)
            await anyio.wait_all_tasks_blocked()
            assert not answers  # the call waits for the first connection ...
            clock.connect.set()
        assert not answers[0].is_error, answers[0]  # ... and is then answered by the upstream
        assert clock.calls == [("get_current_time", {"timezone": "UTC"})]
