"""The stdio relay (``server/fronts/relay.py``): ``tools/call`` answered around the SDK's per-request
machinery, through a real ``toolweave serve`` and a real upstream (``tests/upstreams/shapes.py``), both eras.

Every result is compared with the same call made through the SDK path (the ``call_tool`` meta-tool,
which the relay never serves), and the gateway's debug log tells which requests were relayed: a relay
that stopped serving, or served differently, fails these tests.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from tests.e2e.conftest import TOOLWEAVE, UPSTREAMS
from tests.results import text_part

pytestmark = pytest.mark.anyio

MODES = ["auto", "legacy"]
RELAYED = re.compile(r"relaying tools/call")
RAW = re.compile(r"raw tools/call")


class Gateway:
    def __init__(self, client: Client, log: Path, audit: Path) -> None:
        self.client = client
        self.log = log
        self.audit = audit

    def relayed(self) -> int:
        return len(RELAYED.findall(self.log.read_text()))

    def raw(self) -> int:
        """Calls the gateway sent to the upstream around the SDK client (``adapters/mcp/raw.py``)."""
        return len(RAW.findall(self.log.read_text()))

    def audited(self) -> list[dict[str, Any]]:
        if not self.audit.exists():
            return []
        return [json.loads(line) for line in self.audit.read_text().splitlines() if line.strip()]


@asynccontextmanager
async def gateway(
    tmp_path: Path, mode: str, timeout_s: float | None = None, **client: Any
) -> AsyncIterator[Gateway]:
    manifest = tmp_path / "m.yaml"
    extra = f"    timeout_s: {timeout_s}\n" if timeout_s else ""
    manifest.write_text(
        f"servers:\n  shapes:\n    command: {sys.executable}\n"
        f"    args: [{json.dumps(str(UPSTREAMS / 'shapes.py'))}]\n    protocol: {mode}\n{extra}"
    )
    audit = tmp_path / "audit.jsonl"
    env = dict(
        os.environ,
        TOOLWEAVE_LOG_LEVEL="DEBUG",
        TOOLWEAVE_STARTUP_CALL_WAIT_S="0",
        TOOLWEAVE_MAX_RESULT_CHARS="5000",
        TOOLWEAVE_SECURITY__AUDIT_LOG=str(audit),
    )
    params = StdioServerParameters(
        command=TOOLWEAVE,
        args=["serve", "--manifest", str(manifest), "--registry", str(tmp_path / "registry")],
        env=env,
    )
    log = tmp_path / "gateway.log"
    with log.open("w") as errlog:
        async with Client(stdio_client(params, errlog=errlog), mode=mode, **client) as c:
            assert (c.protocol_version == "2026-07-28") == (mode == "auto")
            await c.list_tools()  # the SDK path meets the client first: the relay learns its session
            # the registry open and the upstream connected (the relay hands calls before that to the SDK)
            assert not (await through_sdk(c, "shapes__echo", {"text": "ready"})).is_error
            yield Gateway(c, log, audit)


def same(result: types.CallToolResult) -> dict[str, Any]:
    return result.model_dump(mode="json", exclude_none=True)


async def through_sdk(client: Client, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
    return await client.call_tool("call_tool", {"name": name, "arguments": arguments})


CASES: list[tuple[str, dict[str, Any]]] = [
    ("shapes__weather", {"city": "Tokyo"}),  # structured content, output schema
    ("shapes__picture", {}),  # image + text blocks
    ("shapes__fail", {}),  # the tool's own error result
    ("shapes__echo", {"text": "héllo\nworld \u2713"}),
    ("shapes__echo", {"text": 42}),  # wrong arguments: the gateway's clear error, no upstream call
    ("shapes__echo", {}),  # a required argument missing
    ("shapes__big", {"size": 200_000}),  # a huge payload, truncated to max_result_chars
    ("shapes__nope", {}),  # no such tool
]


@pytest.mark.parametrize("mode", MODES)
async def test_relayed_results_equal_the_sdk_path(mode: str, tmp_path: Path) -> None:
    async with gateway(tmp_path, mode) as gw:
        for name, arguments in CASES:
            relayed = await gw.client.call_tool(name, arguments)
            reference = await through_sdk(gw.client, name, arguments)
            assert same(relayed) == same(reference), name
        assert gw.relayed() == len(CASES)
        weather = await gw.client.call_tool("shapes__weather", {"city": "Oslo"})
        assert weather.structured_content == {"city": "Oslo", "temp_c": 21.5, "tags": ["sunny", "ünïcode ✓"]}
        picture = await gw.client.call_tool("shapes__picture", {})
        assert [c.type for c in picture.content] == ["image", "text"]
        wrong = await gw.client.call_tool("shapes__echo", {"text": 42})
        assert wrong.is_error and "text: 42 is not of type 'string'" in text_part(wrong)
        big = await gw.client.call_tool("shapes__big", {"size": 200_000})
        assert "result truncated to 5,000 of" in text_part(big, -1)
        if mode == "auto":  # the 2026 era's results carry the gateway's own server stamp
            assert (weather.meta or {})["io.modelcontextprotocol/serverInfo"]["name"] == "toolweave"
        # 5 of the cases reach the upstream, twice each; the warm-up and 3 more above: all of them raw
        assert gw.raw() == 2 * 5 + 1 + 3
        calls = [a for a in gw.audited() if a["tool"].startswith("shapes__")]
        assert len(calls) == 1 + 2 * len(CASES) + 4  # usage, metrics and audit recorded for relayed calls too


@pytest.mark.parametrize("mode", MODES)
async def test_raw_upstream_results_equal_the_sdk_clients(mode: str, tmp_path: Path) -> None:
    """The upstream hop without the SDK client gives what the SDK client gets from the same upstream."""
    direct = StdioServerParameters(command=sys.executable, args=[str(UPSTREAMS / "shapes.py")])
    cases: list[tuple[str, dict[str, Any]]] = [
        ("weather", {"city": "Lima"}),
        ("picture", {}),
        ("echo", {"text": "ü ✓"}),
        ("big", {"size": 3000}),
    ]
    async with gateway(tmp_path, mode) as gw, Client(direct, mode=mode) as upstream:
        await upstream.list_tools()  # the SDK client checks structured content against output schemas
        for name, arguments in cases:
            through = await gw.client.call_tool(f"shapes__{name}", arguments)
            reference = await upstream.call_tool(name, arguments)
            assert through.model_dump(exclude={"meta"}) == reference.model_dump(exclude={"meta"}), name
        lie = await gw.client.call_tool("shapes__liar", {})  # garbage from the upstream: a clear error
        assert lie.is_error
        assert "Invalid structured content returned by tool liar" in text_part(lie)
        assert gw.raw() == 2 + len(cases)


@pytest.mark.parametrize("mode", MODES)
async def test_concurrent_calls_get_their_own_answers(mode: str, tmp_path: Path) -> None:
    async with gateway(tmp_path, mode) as gw:
        answers: dict[int, str] = {}

        async def one(n: int) -> None:
            result = await gw.client.call_tool(
                "shapes__slow", {"seconds": (n * 7 % 10) / 40, "text": f"n{n}"}
            )
            answers[n] = text_part(result)

        async with anyio.create_task_group() as tg:
            for n in range(24):
                tg.start_soon(one, n)
        assert answers == {n: f"echo:n{n}" for n in range(24)}
        assert gw.relayed() == 24 and gw.raw() == 1 + 24


@pytest.mark.parametrize("mode", MODES)
async def test_a_cancelled_call_stops_and_the_gateway_serves_on(mode: str, tmp_path: Path) -> None:
    async with gateway(tmp_path, mode) as gw:
        with anyio.move_on_after(1.0):  # the client gives up: it sends notifications/cancelled
            await gw.client.call_tool("shapes__slow", {"seconds": 60, "text": "never"})
        with anyio.fail_after(20):
            while not any(a["outcome"] == "cancelled" for a in gw.audited()):
                await anyio.sleep(0.1)
        assert [a["tool"] for a in gw.audited() if a["outcome"] == "cancelled"] == ["shapes__slow"]
        after = await gw.client.call_tool("shapes__echo", {"text": "still here"})
        assert text_part(after) == "echo:still here"
        assert gw.relayed() == 2


@pytest.mark.parametrize("mode", MODES)
async def test_a_call_timeout_is_a_tool_error(mode: str, tmp_path: Path) -> None:
    async with gateway(tmp_path, mode, timeout_s=1) as gw:
        relayed = await gw.client.call_tool("shapes__slow", {"seconds": 30})
        reference = await through_sdk(gw.client, "shapes__slow", {"seconds": 30})
        assert relayed.is_error and "no answer within 1 s (call timeout)" in text_part(relayed)
        assert same(relayed) == same(reference)
        assert gw.relayed() == 1


@pytest.mark.parametrize("mode", MODES)
async def test_an_upstream_that_dies_mid_call(mode: str, tmp_path: Path) -> None:
    async with gateway(tmp_path, mode) as gw:
        died = await gw.client.call_tool("shapes__crash", {})
        assert died.is_error
        assert (died.structured_content or {})["error"]["code"] in ("upstream_error", "unavailable")
        with anyio.fail_after(60):  # the gateway reconnects the upstream and serves on
            while (await gw.client.call_tool("shapes__echo", {"text": "back"})).is_error:
                await anyio.sleep(0.3)
        assert gw.relayed() >= 2


async def test_a_handshake_client_that_samples_keeps_the_sdk_path(tmp_path: Path) -> None:
    async def sampling(context: Any, params: Any) -> Any:
        return types.CreateMessageResult(role="assistant", content=types.TextContent(text="hi"), model="m")

    async with gateway(tmp_path, "legacy", sampling_callback=sampling) as gw:
        result = await gw.client.call_tool("shapes__echo", {"text": "x"})
        assert text_part(result) == "echo:x"
        assert gw.relayed() == 0  # its upstream may ask it through the request: only the SDK can
        assert gw.raw() == 0  # ... and only the SDK client drives an upstream's sampling request


ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},  # no clientInfo: the least the SDK accepts
}


class Wire:
    """A client that speaks raw JSON-RPC lines, to compare what is written, not what a client parses."""

    def __init__(self, proc: anyio.abc.Process, modern: bool) -> None:
        assert proc.stdin is not None and proc.stdout is not None
        self.stdin, self.stdout = proc.stdin, proc.stdout
        self.modern = modern
        self.buffer = b""
        self.ids = 0
        self.seen: list[dict[str, Any]] = []

    async def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        self.ids += 1
        params = dict(params or {})
        if self.modern:
            params["_meta"] = ENVELOPE
        await self.send({"jsonrpc": "2.0", "id": self.ids, "method": method, "params": params})
        with anyio.fail_after(60):
            while True:
                while b"\n" not in self.buffer:
                    self.buffer += await self.stdout.receive()
                raw, self.buffer = self.buffer.split(b"\n", 1)
                message: dict[str, Any] = json.loads(raw)
                self.seen.append(message)
                if message.get("id") == self.ids:
                    return message

    async def send(self, message: dict[str, Any]) -> None:
        await self.stdin.send((json.dumps(message) + "\n").encode())


@pytest.mark.parametrize("mode", MODES)
async def test_the_relayed_line_is_the_sdks_line(mode: str, tmp_path: Path) -> None:
    """On the wire itself: the relayed answer's result is exactly the one the SDK path writes (the
    era's result surface, ``resultType``, the server stamp), for every case above."""
    upstream = json.dumps(str(UPSTREAMS / "shapes.py"))
    manifest = tmp_path / "m.yaml"
    manifest.write_text(
        f"servers:\n  shapes:\n    command: {sys.executable}\n    args: [{upstream}]\n    protocol: {mode}\n"
    )
    env = dict(os.environ, TOOLWEAVE_LOG_LEVEL="DEBUG", TOOLWEAVE_STARTUP_CALL_WAIT_S="0")
    command = [TOOLWEAVE, "serve", "--manifest", str(manifest), "--registry", str(tmp_path / "registry")]
    log = tmp_path / "gateway.log"
    with log.open("w") as errlog:
        async with await anyio.open_process(command, env=env, stderr=errlog) as proc:
            wire = Wire(proc, modern=mode == "auto")
            if wire.modern:
                assert "result" in await wire.request("server/discover")
            else:
                client = {"name": "wire", "version": "1"}
                init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": client}
                assert "result" in await wire.request("initialize", init)
                await wire.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
            assert "result" in await wire.request("tools/list")
            ready = {"name": "call_tool", "arguments": {"name": "shapes__echo", "arguments": {"text": "r"}}}
            assert not (await wire.request("tools/call", ready))["result"]["isError"]
            for name, arguments in CASES:
                relayed = await wire.request("tools/call", {"name": name, "arguments": arguments})
                meta = {"name": "call_tool", "arguments": {"name": name, "arguments": arguments}}
                reference = await wire.request("tools/call", meta)
                assert relayed["result"] == reference["result"], name
                assert ("resultType" in relayed["result"]) == wire.modern  # the era's own result surface
            # a call the client cancels is never answered, and the next one is
            slow = {"jsonrpc": "2.0", "id": "slow-1", "method": "tools/call"}
            slow_params: dict[str, Any] = {"name": "shapes__slow", "arguments": {"seconds": 60}}
            await wire.send(
                {**slow, "params": {**slow_params, **({"_meta": ENVELOPE} if wire.modern else {})}}
            )
            await anyio.sleep(0.5)
            cancel = {"requestId": "slow-1", "reason": "the user pressed Esc"}
            await wire.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": cancel})
            await anyio.sleep(0.5)
            echo = await wire.request("tools/call", {"name": "shapes__echo", "arguments": {"text": "next"}})
            assert echo["result"]["content"][0]["text"] == "echo:next"
            assert not [m for m in wire.seen if m.get("id") == "slow-1"]
            await wire.stdin.aclose()
    assert len(RELAYED.findall(log.read_text())) == len(CASES) + 2
