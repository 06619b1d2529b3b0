"""A request the ready table answered while the gateway started is ranked again by the gateway's own
search once that can run (``starting.settle_provisional``): the client hears ``list_changed`` and lists
what the real ranking chose. Real registry and embedder, real MCP SDK client."""

from __future__ import annotations

import threading

import anyio
import pytest
from mcp import Client

from toolweave.registry import Registry
from toolweave.server.gateway import Gateway
from toolweave.server.turns.starting import answer_find_tools_while_starting, settle_provisional
from toolweave.settings import Settings

from .helpers import FakeBackend, notes_tools, time_tools
from .test_ready_index import warm_table
from .test_startup import held_opener

pytestmark = pytest.mark.anyio

# no word of it is in the time tool's text: the table's BM25 finds nothing, the embedder does
UNWORDED = "which hour is it in Japan right now"


async def listed(client: Client) -> list[str]:
    return [t.name for t in (await client.list_tools(cache_mode="bypass")).tools]


async def test_the_tables_answer_is_ranked_again_once_the_search_runs(registry: Registry) -> None:
    await warm_table(registry)
    opened = threading.Event()
    backends = [FakeBackend("clock", time_tools()), FakeBackend("notes", notes_tools())]
    gateway = Gateway(held_opener(registry, opened), backends, Settings(home=registry.path))
    answer_find_tools_while_starting(gateway)
    try:
        async with Client(gateway.server) as client:
            found = await client.call_tool("find_tools", {"query": UNWORDED})
            assert found.structured_content is not None
            assert found.structured_content["tools"] == []  # the table's answer, while starting
            assert "clock__get_current_time" not in await listed(client)
            opened.set()
            with anyio.fail_after(60):
                await gateway.warmed.wait()
                while "clock__get_current_time" not in await listed(client):
                    await anyio.sleep(0.05)
            session = next(iter(gateway.sessions))
            assert gateway.provisional == {}
            assert session.notices >= 1  # announced, as a turn's change is
            assert list(session.queries) == [UNWORDED]  # the same request, not a new one
    finally:
        opened.set()


async def test_a_session_that_asked_again_is_left_alone(registry: Registry) -> None:
    gateway = Gateway(registry, [FakeBackend("clock", time_tools())], Settings(home=registry.path))
    async with Client(gateway.server) as client:
        await client.call_tool("find_tools", {"query": "create a note"})
        with anyio.fail_after(60):
            await gateway.warmed.wait()
        session = next(iter(gateway.sessions))
        before = session.published.ids()
        gateway.provisional[session.key] = UNWORDED  # answered by the table, then asked again
        await settle_provisional(gateway)
        assert session.published.ids() == before
        assert gateway.provisional == {}
