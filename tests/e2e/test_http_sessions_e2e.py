"""One session per client process over streamable HTTP, in both protocol eras, with real clients.

Two copies of one client app on one machine send the same client name and come from the same address;
they must never share a published set (docs/gateway.md, "Sessions"). A reconnect of the same process
may resume its own set: with its ``Mcp-Session-Id`` (handshake era), or without a new
``server/discover`` or with ``io.toolweave/session`` (2026 era). Two processes at once also run with
every core kept busy (``machine``): whether one process's requests are told from the other's must not
depend on timing.
"""

from __future__ import annotations

import json
import subprocess
import sys
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

from .conftest import HttpGateway, gateway_env, start_http_gateway, stop

pytestmark = [pytest.mark.integration, pytest.mark.anyio]

TOKYO = "what time is it in Tokyo"
TIME_TOOL = "time__get_current_time"
META_TOOLS = ["find_tools", "call_tool"]


@pytest.fixture
def gateway(registry_copy: Path, tmp_path: Path) -> Iterator[HttpGateway]:
    manifest = tmp_path / "m.yaml"
    manifest.write_text(
        f"servers:\n  time:\n    command: {sys.executable}\n"
        "    args: [-m, mcp_server_time, --local-timezone, UTC]\n",
        encoding="utf-8",
    )
    gw = start_http_gateway(manifest, registry_copy, tmp_path / "gateway.log")
    yield gw
    stop(gw.proc)


async def listed(client: Client, meta: types.RequestParamsMeta | None = None) -> list[str]:
    return [t.name for t in (await client.list_tools(cache_mode="bypass", meta=meta)).tools]


async def find(client: Client, query: str, meta: types.RequestParamsMeta | None = None) -> list[str]:
    result = await client.call_tool("find_tools", {"query": query}, meta=meta)
    assert result.structured_content is not None, result
    return [t["name"] for t in result.structured_content["tools"]]  # compact: every one published


@asynccontextmanager
async def listening(client: Client) -> AsyncIterator[None]:
    """Hold a ``subscriptions/listen`` stream open, as Claude Code does for its whole life."""
    async with anyio.create_task_group() as tg, client.listen(tools_list_changed=True) as sub:

        async def drain() -> None:
            async for _event in sub:
                pass

        tg.start_soon(drain)
        yield
        tg.cancel_scope.cancel()


# -- 2026-07-28 era ------------------------------------------------------------------------------------
async def test_2026_two_processes_one_after_the_other_never_share(gateway: HttpGateway) -> None:
    with anyio.fail_after(240):
        async with Client(gateway.url) as first:
            assert first.protocol_version == "2026-07-28"
            assert TIME_TOOL in await find(first, TOKYO)
            assert TIME_TOOL in await listed(first)  # its own set, on its next request
        async with Client(gateway.url) as second:  # same client name, same address, a new process
            assert await listed(second) == META_TOOLS


async def test_2026_two_processes_at_once_never_share(machine: str, gateway: HttpGateway) -> None:
    with anyio.fail_after(240):
        async with Client(gateway.url) as older, listening(older):
            async with Client(gateway.url) as newer:
                assert TIME_TOOL in await find(newer, TOKYO)
                # the older one, still running (its listen stream is open), sees none of it
                assert await listed(older) == META_TOOLS
                assert TIME_TOOL in await find(older, TOKYO)
            async with Client(gateway.url) as third:  # and the next one starts empty
                assert await listed(third) == META_TOOLS


async def test_2026_a_reconnect_of_the_same_process_resumes_its_set(gateway: HttpGateway) -> None:
    with anyio.fail_after(240):
        async with Client(gateway.url) as first:
            assert TIME_TOOL in await find(first, TOKYO)
        # the same process connecting again without a new server/discover (it knows the server) ...
        async with Client(gateway.url, mode="2026-07-28") as again:
            assert TIME_TOOL in await listed(again)
        # ... and one that names its session resumes it whatever came in between
        tab = session_meta("e2e-process")
        async with Client(gateway.url) as named:
            assert TIME_TOOL in await find(named, TOKYO, meta=tab)
        async with Client(gateway.url) as other:
            assert await listed(other) == META_TOOLS
        async with Client(gateway.url) as named_again:
            assert TIME_TOOL in await listed(named_again, meta=tab)


# -- handshake era -------------------------------------------------------------------------------------
def test_handshake_two_typescript_sdk_processes_never_share(
    ts_client: Path, gateway: HttpGateway, tmp_path: Path
) -> None:
    for run in range(2):  # two node processes, one after the other; each finds the time tool
        seen = run_node(ts_client, gateway.url, tmp_path / f"client-{run}.log")
        assert seen["first"] == META_TOOLS, seen  # the second starts without the first one's set
        assert TIME_TOOL in seen["atResult"], seen


async def test_handshake_two_processes_at_once_never_share(gateway: HttpGateway) -> None:
    with anyio.fail_after(240):
        async with Client(gateway.url, mode="legacy") as a, Client(gateway.url, mode="legacy") as b:
            assert a.protocol_version != "2026-07-28"
            assert TIME_TOOL in await find(a, TOKYO)
            assert await listed(b) == META_TOOLS
            assert TIME_TOOL in await listed(a)


def test_handshake_a_reconnect_with_its_session_id_resumes_its_set(gateway: HttpGateway) -> None:
    """New TCP connections (a new HTTP client) carrying the session's ``Mcp-Session-Id``: same set."""
    with httpx.Client(timeout=120) as first:
        session_id = rpc(first, gateway.url, None, "initialize", INITIALIZE)[0]
        notify = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        first.post(gateway.url, json=notify, headers=headers(session_id)).raise_for_status()
        found = rpc(
            first,
            gateway.url,
            session_id,
            "tools/call",
            {"name": "find_tools", "arguments": {"query": TOKYO}},
        )
        assert found[1]["structuredContent"]["tool_list_changed"] is True
    with httpx.Client(timeout=120) as again:
        tools = rpc(again, gateway.url, session_id, "tools/list", {})[1]["tools"]
        assert TIME_TOOL in [t["name"] for t in tools]
    with httpx.Client(timeout=120) as other:  # a new session starts empty
        other_id = rpc(other, gateway.url, None, "initialize", INITIALIZE)[0]
        other.post(gateway.url, json=notify, headers=headers(other_id)).raise_for_status()
        tools = rpc(other, gateway.url, other_id, "tools/list", {})[1]["tools"]
        assert [t["name"] for t in tools] == META_TOOLS


INITIALIZE = {
    "protocolVersion": "2025-11-25",
    "capabilities": {},
    "clientInfo": {"name": "toolweave-e2e", "version": "1"},
}


def headers(session_id: str | None) -> dict[str, str]:
    sent = {"accept": "application/json, text/event-stream", "mcp-protocol-version": "2025-11-25"}
    return sent if session_id is None else {**sent, "mcp-session-id": session_id}


def rpc(
    client: httpx.Client, url: str, session_id: str | None, method: str, params: dict[str, Any]
) -> tuple[str, dict[str, Any]]:
    """One handshake-era request: (the session id the server names, the result)."""
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    response = client.post(url, json=body, headers=headers(session_id))
    response.raise_for_status()
    text = response.text
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        text = next(line[5:] for line in text.splitlines() if line.startswith("data:") and '"id"' in line)
    answer = json.loads(text)
    assert "result" in answer, answer
    return response.headers.get("mcp-session-id") or session_id or "", answer["result"]


def run_node(script: Path, url: str, log: Path) -> dict[str, Any]:
    with log.open("ab") as err:
        done = subprocess.run(
            ["node", str(script), "http", url, TOKYO],
            stdout=subprocess.PIPE,
            stderr=err,
            env=gateway_env(),
            timeout=600,
        )
    assert done.returncode == 0, log.read_text(errors="replace")[-3000:]
    seen: dict[str, Any] = json.loads(done.stdout.decode().strip().splitlines()[-1])
    return seen
