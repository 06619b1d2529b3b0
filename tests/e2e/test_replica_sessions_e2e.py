"""Two `toolweave serve --transport http` replicas on one registry share 2026-era sessions through a real
redis-server: a set published through one is listed by the other, context included."""

from __future__ import annotations

import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import mcp_types as types
import pytest
from mcp import Client

from tests.meta import session_meta
from tests.redis_server import PASSWORD, RedisServer, running_redis

from .conftest import Upstream, start_http_gateway, stop

pytestmark = [pytest.mark.integration, pytest.mark.anyio]


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    yield from running_redis(tmp_path)


def manifest(path: Path, dyn_url: str) -> Path:
    path.write_text(
        f"""
servers:
  time:
    command: {sys.executable}
    args: [-m, mcp_server_time, --local-timezone, UTC]
  dyn:
    url: {dyn_url}
""",
        encoding="utf-8",
    )
    return path


def doc(result: types.CallToolResult) -> dict[str, Any]:
    assert result.structured_content is not None, result
    return result.structured_content


@asynccontextmanager
async def listening_for_list_changed(url: str, meta: types.RequestParamsMeta) -> AsyncIterator[anyio.Event]:
    """A 2026-era ``subscriptions/listen`` stream that names its session in ``_meta`` (the SDK's
    ``Client.listen`` sends no ``_meta`` of the caller's): the event is set on ``list_changed``."""
    envelope = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "toolweave-e2e", "version": "1"},
        **meta,
    }
    body = {
        "jsonrpc": "2.0",
        "id": "listen-1",
        "method": "subscriptions/listen",
        "params": {"_meta": envelope, "notifications": {"toolsListChanged": True}},
    }
    headers = {
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": "2026-07-28",
        "mcp-method": "subscriptions/listen",
    }
    acknowledged, heard = anyio.Event(), anyio.Event()

    async def listen(client: httpx.AsyncClient) -> None:
        async with client.stream("POST", url, json=body, headers=headers) as response:
            async for line in response.aiter_lines():
                if "notifications/subscriptions/acknowledged" in line:
                    acknowledged.set()
                if "notifications/tools/list_changed" in line:
                    heard.set()

    async with httpx.AsyncClient(timeout=None) as client, anyio.create_task_group() as tg:
        tg.start_soon(listen, client)
        with anyio.fail_after(30):
            await acknowledged.wait()
        yield heard
        tg.cancel_scope.cancel()


def score_of(found: dict[str, Any], name: str) -> float:
    why = next(t["why"] for t in found["tools"] if t["name"] == name)  # "search hit (score 1.489)"
    return float(why.rsplit(" ", 1)[1].rstrip(")"))


@pytest.fixture
def spec(
    redis_server: RedisServer, upstream: Upstream, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Path:
    """The manifest of gateways that keep their sessions in ``redis_server`` (named in the environment)."""
    monkeypatch.setenv("TOOLWEAVE_SESSION_STORE_URL", redis_server.url)
    return manifest(tmp_path / "manifest.yaml", upstream.url)


async def test_a_session_moves_between_replicas_with_its_set_and_context(
    spec: Path, registry_copy: Path, tmp_path: Path
) -> None:
    a = start_http_gateway(spec, registry_copy, tmp_path / "a.log")
    b = start_http_gateway(spec, registry_copy, tmp_path / "b.log")
    tab = session_meta("e2e-tab")
    try:
        async with Client(a.url) as on_a, Client(b.url) as on_b:
            assert on_a.protocol_version == on_b.protocol_version == "2026-07-28"
            for client in (on_a, on_b):  # both replicas ready (a find_tools waits for the registry)
                await client.call_tool("find_tools", {"query": "warm up"}, meta=session_meta("warm-up"))
            first = doc(await on_a.call_tool("find_tools", {"query": "what time is it in Tokyo"}, meta=tab))
            assert first["tool_list_changed"]
            published = [t["name"] for t in first["tools"]]
            assert "time__get_current_time" in published

            listed = [t.name for t in (await on_b.list_tools(cache_mode="bypass", meta=tab)).tools]
            assert set(published) <= set(listed)
            assert [t.name for t in (await on_b.list_tools(cache_mode="bypass")).tools] == [
                "find_tools",
                "call_tool",
            ]  # a client without the session key has its own, empty set

            # the follow-up on B is retrieved with A's turn as context: the time tool ranks higher than
            # for a session without that context
            follow_up = {"query": "and what about in Paris", "detail": True}  # every tool, with its score
            carried = doc(await on_b.call_tool("find_tools", follow_up, meta=tab))
            fresh = doc(await on_b.call_tool("find_tools", follow_up, meta=session_meta("other")))
            assert score_of(carried, "time__get_current_time") > score_of(fresh, "time__get_current_time")

            # and back on A (which held an older copy): B's additions are listed there too
            added_on_b = {t["name"] for t in carried["tools"] if t["published"]}  # detail: flagged
            listed = [t.name for t in (await on_a.list_tools(cache_mode="bypass", meta=tab)).tools]
            assert added_on_b - set(published)  # B did add something
            assert added_on_b <= set(listed)

            # a 2026 client listening on B hears a change its session got through A (pub/sub -> notice);
            # the session moves between replicas because it is named (an unnamed one is per process)
            listener = session_meta("e2e-listener")
            async with listening_for_list_changed(b.url, listener) as heard:
                await on_a.call_tool("find_tools", {"query": "what time is it in Tokyo"}, meta=listener)
                with anyio.fail_after(15):
                    await heard.wait()
    finally:
        stop(a.proc)
        stop(b.proc)
    for gateway in (a, b):
        assert PASSWORD not in gateway.logs()


async def test_a_gateway_keeps_answering_while_redis_is_down_and_writes_back_when_it_returns(
    redis_server: RedisServer, spec: Path, registry_copy: Path, tmp_path: Path
) -> None:
    from toolweave.server.sessions.shared import NAMESPACE

    gateway = start_http_gateway(spec, registry_copy, tmp_path / "a.log")
    tab = session_meta("e2e-outage")
    try:
        async with Client(gateway.url) as client:
            first = doc(await client.call_tool("find_tools", {"query": "what time is it in Tokyo"}, meta=tab))
            assert "time__get_current_time" in [t["name"] for t in first["tools"]]
            assert redis_server.client().keys(NAMESPACE + "*")  # healthy: the session is in Redis

            redis_server.kill()  # mid-run, after the gateway used it
            echo = {"query": "echo the text back", "detail": True}  # every tool found, with its flag
            during = doc(await client.call_tool("find_tools", echo, meta=tab))
            published = {t["name"] for t in during["tools"] if t["published"]}  # detail: flagged
            # local state: the new topic's tool published (the old topic's guess left: a topic move)
            assert "dyn__echo" in published and "time__get_current_time" not in published
            echoed = await client.call_tool(
                "call_tool", {"name": "dyn__echo", "arguments": {"text": "hi"}}, meta=tab
            )
            assert not echoed.is_error and "hi" in str(echoed.content)
            assert published <= {
                t.name for t in (await client.list_tools(cache_mode="bypass", meta=tab)).tools
            }
            assert "unreachable" in gateway.logs()
            assert gateway.proc.poll() is None

            redis_server.start()  # back, empty
            deadline = time.monotonic() + 30
            while "reachable again" not in gateway.logs():
                assert time.monotonic() < deadline, gateway.logs()[-3000:]
                await anyio.sleep(0.1)
            await client.call_tool("find_tools", {"query": "what time is it in Paris"}, meta=tab)
            assert redis_server.client().keys(NAMESPACE + "*")  # what changed meanwhile is written back
    finally:
        stop(gateway.proc)
    assert gateway.logs().count("unreachable") == 1  # once per outage
    assert PASSWORD not in gateway.logs()
