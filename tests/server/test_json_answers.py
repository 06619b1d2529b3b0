"""find_tools and tools/list answered as one JSON body over streamable HTTP, everything else as the SDK's
SSE stream (server/fronts/json_answers.py): the real gateway under uvicorn on 127.0.0.1, a raw HTTP client
and a real MCP SDK client, which still gets sampling on its call's stream and list_changed on its GET
stream."""

from __future__ import annotations

import json
from typing import Any

import httpx
import mcp_types as types
import pytest
from mcp import Client

from tests.e2e.watch import ListChanged, watching
from tests.net import free_port
from tests.results import text_part
from tests.server.helpers import NOTE_EDGE, FakeBackend, notes_tools, time_tools
from tests.server.test_security_http import serving
from toolweave.server.fronts.json_answers import answers_as_json
from toolweave.server.fronts.transports import http_app
from toolweave.server.gateway import Gateway
from toolweave.settings import Settings

pytestmark = [pytest.mark.anyio]

JSON_AND_SSE = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def _call(name: str, **extra: Any) -> bytes:
    body = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": name, "arguments": {}}}
    return json.dumps({**body, **extra}).encode()


@pytest.mark.parametrize(
    ("body", "accept", "expected"),
    [
        (_call("find_tools"), (True, True), True),
        (_call("find_tools"), (True, False), False),  # JSON only: the SSE mode's 406 must stay
        (_call("find_tools"), (False, True), False),
        (_call("call_tool"), (True, True), False),  # may sample: keeps its request stream
        (_call("notes__find_tools_like"), (True, True), False),
        (_call("find_tools", method="tools/list"), (True, True), True),
        (json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).encode(), (True, False), False),
        (json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"}).encode(), (True, True), False),
        (json.dumps({"jsonrpc": "2.0", "method": "tools/list"}).encode(), (True, True), False),
        (
            json.dumps({"jsonrpc": "2.0", "method": "tools/call", "params": {"name": "find_tools"}}).encode(),
            (True, True),
            False,
        ),  # a notification has no answer
        (b'{"method": "tools/call", "params": {"name": "find_tools"', (True, True), False),  # broken JSON
        (b'["find_tools"]', (True, True), False),
    ],
)
def test_only_find_tools_calls_and_tool_lists_are_answered_as_json(
    body: bytes, accept: tuple[bool, bool], expected: bool
) -> None:
    assert answers_as_json(body, *accept) is expected


def _gateway(registry: Any) -> tuple[Gateway, FakeBackend]:
    clock = FakeBackend("clock", time_tools())
    clock.behaviour = "sample"
    notes = FakeBackend("notes", notes_tools(), [NOTE_EDGE])
    settings = Settings(home=registry.path, call_timeout_s=5)
    return Gateway(registry, [clock, notes], settings), clock


def _messages(response: httpx.Response) -> list[dict[str, Any]]:
    if response.headers["content-type"].startswith("text/event-stream"):
        return [json.loads(line[5:]) for line in response.text.splitlines() if line.startswith("data:")]
    return [response.json()]


async def test_find_tools_is_json_other_requests_stay_sse(registry: Any) -> None:
    gateway, _ = _gateway(registry)
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    with serving(http_app(gateway, port=port), port, gateway):
        async with httpx.AsyncClient(timeout=30) as http:
            init = {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t"}},
            }
            opened = await http.post(url, json=init, headers=JSON_AND_SSE)
            assert opened.headers["content-type"].startswith("text/event-stream")
            headers = {
                **JSON_AND_SSE,
                "Mcp-Session-Id": opened.headers["mcp-session-id"],
                "Mcp-Protocol-Version": "2025-11-25",
            }
            sent = await http.post(
                url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers
            )
            assert sent.status_code == 202

            find = {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "tools/call",
                "params": {"name": "find_tools", "arguments": {"query": "what time is it in Tokyo", "k": 3}},
            }
            found = await http.post(url, json=find, headers=headers)
            assert found.status_code == 200
            assert found.headers["content-type"] == "application/json"
            assert found.headers["mcp-session-id"] == headers["Mcp-Session-Id"]
            answer = found.json()
            assert answer["id"] == 2 and "error" not in answer
            tools = answer["result"]["structuredContent"]["tools"]
            assert tools and tools[0]["name"] == "clock__get_current_time"
            assert json.loads(answer["result"]["content"][0]["text"]) == answer["result"]["structuredContent"]

            listed = await http.post(
                url, json={"jsonrpc": "2.0", "id": 3, "method": "tools/list"}, headers=headers
            )
            assert listed.headers["content-type"] == "application/json"
            names = {t["name"] for t in listed.json()["result"]["tools"]}
            assert "clock__get_current_time" in names  # published by the JSON-answered call

            # anything else keeps the SDK's SSE stream: a proxied call (which may sample), a ping
            call = {
                "jsonrpc": "2.0",
                "id": 6,
                "method": "tools/call",
                "params": {"name": "clock__get_current_time", "arguments": {"timezone": "UTC"}},
            }
            proxied = await http.post(url, json=call, headers=headers)
            assert proxied.headers["content-type"].startswith("text/event-stream")
            assert _messages(proxied)[-1]["result"]["content"][0]["text"] == "no sampler"
            pinged = await http.post(url, json={"jsonrpc": "2.0", "id": 8, "method": "ping"}, headers=headers)
            assert pinged.headers["content-type"].startswith("text/event-stream")

            bad = {**find, "id": 4, "params": {"name": "find_tools", "arguments": {"query": 5}}}
            refused = await http.post(url, json=bad, headers=headers)
            assert refused.headers["content-type"] == "application/json"
            assert refused.json()["result"]["isError"]  # the schema check's answer, unchanged

            json_only = {**headers, "Accept": "application/json"}
            assert (await http.post(url, json={**find, "id": 5}, headers=json_only)).status_code == 406


async def test_sdk_client_keeps_sampling_and_list_changed(registry: Any) -> None:
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    gateway, _ = _gateway(registry)
    port = free_port()

    async def sampling(context: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        return types.CreateMessageResult(role="assistant", model="t", content=types.TextContent(text="hi"))

    watch = ListChanged()
    with serving(http_app(gateway, port=port), port, gateway):
        async with (
            httpx2.AsyncClient(timeout=30) as http,
            Client(
                streamable_http_client(f"http://127.0.0.1:{port}/mcp", http_client=http),
                mode="legacy",
                sampling_callback=sampling,
                message_handler=watch.on_message,
            ) as client,
            watching(client, watch),
        ):
            found = await client.call_tool("find_tools", {"query": "what time is it in Tokyo", "k": 2})
            assert found.structured_content and found.structured_content["tool_list_changed"]
            await watch.wait(timeout=10)  # the notice reached the GET stream
            names = {t.name for t in (await client.list_tools(cache_mode="bypass")).tools}
            assert "clock__get_current_time" in names
            # a proxied call still has its request stream: the upstream's sampling reaches the client
            called = await client.call_tool("clock__get_current_time", {"timezone": "UTC"})
            assert text_part(called) == "sampled: hi"
