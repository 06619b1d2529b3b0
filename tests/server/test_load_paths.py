"""What keeps 50 concurrent HTTP sessions' tail short: a result is held for a re-list only
when the client can hear ``list_changed`` (its GET stream is open), and the started gateway's heap is
frozen out of the full garbage collections. Real gateway under uvicorn on 127.0.0.1, raw HTTP client."""

from __future__ import annotations

import gc
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from types import SimpleNamespace
from typing import Any

import anyio
import httpx
import pytest

from tests.net import free_port
from tests.server.helpers import NOTE_EDGE, FakeBackend, notes_tools, time_tools
from tests.server.test_security_http import serving
from toolweave.server.fronts.transports import http_app
from toolweave.server.gateway import Gateway
from toolweave.server.heap import frozen_once_started
from toolweave.settings import PublishSettings, Settings

pytestmark = [pytest.mark.anyio]

JSON_AND_SSE = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
VERSION = "2025-11-25"


def _gateway(registry: Any) -> Gateway:
    backends = [FakeBackend("clock", time_tools()), FakeBackend("notes", notes_tools(), [NOTE_EDGE])]
    # A hold that ran its course would take 5 s and mark the session as one that does not re-list.
    settings = Settings(
        home=registry.path,
        publish=PublishSettings(relist_wait_ms=5000, relist_probe_ms=5000),
        call_timeout_s=5,
    )
    return Gateway(registry, backends, settings)


class RawSession:
    """A handshake-era client speaking plain JSON-RPC over HTTP (like ``bench/load_bench.py``)."""

    def __init__(self, http: httpx.AsyncClient, url: str) -> None:
        self.http, self.url, self.headers = http, url, dict(JSON_AND_SSE)
        self.order: list[str] = []  # what the client received, in order

    async def start(self) -> None:
        init = {"protocolVersion": VERSION, "capabilities": {}, "clientInfo": {"name": "load"}}
        opened = await self.post("initialize", init, 1)
        self.headers.update(
            {"Mcp-Session-Id": opened.headers["mcp-session-id"], "Mcp-Protocol-Version": VERSION}
        )
        sent = await self.http.post(
            self.url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=self.headers
        )
        assert sent.status_code == 202

    async def post(self, method: str, params: dict[str, Any], id_: int) -> httpx.Response:
        body = {"jsonrpc": "2.0", "id": id_, "method": method, "params": params}
        response = await self.http.post(self.url, json=body, headers=self.headers)
        assert response.status_code == 200, response.text
        self.order.append(method)
        return response

    async def find_tools(self, query: str, id_: int) -> dict[str, Any]:
        params = {"name": "find_tools", "arguments": {"query": query, "k": 2}}
        answer = (await self.post("tools/call", params, id_)).json()
        result: dict[str, Any] = answer["result"]["structuredContent"]
        return result

    async def get_stream(self, *, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
        """Hold the GET stream open and re-list on each list_changed, as a listening client does."""
        headers = {k: v for k, v in self.headers.items() if k != "Content-Type"}
        headers["Accept"] = "text/event-stream"
        async with self.http.stream("GET", self.url, headers=headers) as stream:
            assert stream.status_code == 200
            task_status.started()
            async for line in stream.aiter_lines():
                if line.startswith("data:") and "list_changed" in line:
                    self.order.append("list_changed")
                    await self.post("tools/list", {}, 100 + len(self.order))


@asynccontextmanager
async def _served(registry: Any) -> AsyncIterator[tuple[Gateway, str]]:
    gateway = _gateway(registry)
    port = free_port()
    with serving(http_app(gateway, port=port), port, gateway):
        yield gateway, f"http://127.0.0.1:{port}/mcp"


async def test_no_hold_for_a_client_without_a_get_stream(registry: Any) -> None:
    async with _served(registry) as (gateway, url), httpx.AsyncClient(timeout=30) as http:
        client = RawSession(http, url)
        await client.start()
        found = await client.find_tools("what time is it in Tokyo", 2)
        assert found["tool_list_changed"] is True
        (session,) = list(gateway.sessions)
        assert not gateway.notifier.can_reach(session)
        # the notice was sent as before; nobody waited for a re-list it could not prompt
        assert session.notices == 1
        assert session.relists_on_notice is None  # a hold that timed out would have set it False


async def test_a_client_with_a_get_stream_is_still_held_until_it_relisted(registry: Any) -> None:
    async with (
        _served(registry) as (gateway, url),
        httpx.AsyncClient(timeout=30) as http,
        anyio.create_task_group() as tg,
    ):
        client = RawSession(http, url)
        await client.start()
        connection = SimpleNamespace(session_id=client.headers["Mcp-Session-Id"])
        assert gateway.notifier.channel_open is not None
        assert gateway.notifier.channel_open(connection) is False
        await tg.start(client.get_stream)
        with anyio.fail_after(10):  # the SDK registers the GET stream just after sending its headers
            while not gateway.notifier.channel_open(connection):
                await anyio.sleep(0.01)
        found = await client.find_tools("what time is it in Tokyo", 2)
        assert found["tool_list_changed"] is True
        # the answer came after the notice and the re-list it prompted, as without the GET-stream check
        assert client.order[-3:] == ["list_changed", "tools/list", "tools/call"]
        (session,) = list(gateway.sessions)
        assert session.relists_on_notice is True and session.listed_notices == session.notices == 1
        tg.cancel_scope.cancel()


async def test_a_call_from_another_connection_is_not_told_apart(registry: Any) -> None:
    """The check only knows the HTTP manager's sessions: any other connection counts as reachable."""
    gateway = _gateway(registry)
    http_app(gateway, port=free_port())
    assert gateway.notifier.channel_open is not None
    assert gateway.notifier.channel_open(object()) is None

    class Connection:
        session_id = "not-a-session-of-this-manager"

    assert gateway.notifier.channel_open(Connection()) is None


async def test_the_heap_is_frozen_once_the_gateway_started(registry: Any) -> None:
    gateway = _gateway(registry)
    gc.unfreeze()
    try:
        async with gateway.running(), frozen_once_started(gateway):
            assert gc.get_freeze_count() == 0 or gateway.warmed.is_set()
            with anyio.fail_after(60):
                await gateway.warmed.wait()  # set after the registry opened and the model loaded
                while gc.get_freeze_count() == 0:
                    await anyio.sleep(0.01)
            frozen = gc.get_freeze_count()
        assert frozen > 10_000  # the SDK, the registry, the model wrappers: everything the start made
    finally:
        gc.unfreeze()  # give the test process its collector back


async def test_nothing_is_frozen_while_the_gateway_is_starting() -> None:
    class Starting:
        warmed = anyio.Event()

    gc.unfreeze()
    async with frozen_once_started(Starting()):
        await anyio.wait_all_tasks_blocked()  # the freezer ran as far as it can: to its wait for the start
        assert gc.get_freeze_count() == 0
