"""First contact over streamable HTTP: ``toolweave serve --transport http`` listens from its first moment
and answers the handshake before the MCP SDK is imported (``server/fronts/http_front.py``), in both protocol
eras, on the machine as it is and with every core kept busy (``machine``).

Each gateway here runs with the SDK's import held at a gate (``GATED_SERVE``): whatever it answers before
the test opens the gate, the front answered. Then the gate opens, the full app takes over, and the same
client session goes on: its ``find_tools`` publishes into the session the front began, the client hears
``list_changed`` (on its GET stream, or on the listen stream the front acknowledged) and lists the new tool.
No timing is asserted: the gate holds start-up for as long as the test needs.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import Client

from tests.net import free_port, wait_port

from .conftest import TOOLWEAVE, gateway_env, stop
from .test_startup_e2e import GATED_SERVE, MODERN_META
from .watch import ListChanged, watching

pytestmark = [pytest.mark.integration, pytest.mark.anyio]

TOKYO = "what time is it in Tokyo"
TIME_TOOL = "time__get_current_time"
META_TOOLS = ["find_tools", "call_tool"]
MODES = ["legacy", "auto"]  # the handshake era (initialize), the 2026-07-28 era (server/discover)
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


class Gated:
    """A gateway process whose MCP SDK import waits for ``open_gate``."""

    def __init__(self, tmp_path: Path, manifest: Path, registry: Path, *args: str) -> None:
        self.port = free_port()
        self.gate = tmp_path / "sdk-may-load"
        self.log = tmp_path / "gateway.log"
        serve = ["serve", "--manifest", str(manifest), "--registry", str(registry)]
        serve += ["--transport", "http", "--port", str(self.port), *args]
        with self.log.open("wb") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", GATED_SERVE, *serve, str(self.gate)],
                stdout=subprocess.DEVNULL,
                stderr=err,
                env=gateway_env(),
            )
        # the one wait the design cannot avoid: the interpreter starting, before the port is bound
        wait_port(self.port, self.proc, timeout=120)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def held(self) -> bool:
        """Whether the SDK's import is still held (nothing but the front can have answered)."""
        return not self.gate.exists() and self.proc.poll() is None

    def open_gate(self) -> None:
        self.gate.touch()

    def logs(self) -> str:
        return self.log.read_text(errors="replace")


@pytest.fixture
def gated(time_manifest: Path, registry_copy: Path, tmp_path: Path) -> Iterator[Gated]:
    gateway = Gated(tmp_path, time_manifest, registry_copy)
    yield gateway
    gateway.open_gate()
    stop(gateway.proc)


async def listed(client: Client) -> list[str]:
    return [t.name for t in (await client.list_tools(cache_mode="bypass")).tools]


@pytest.mark.parametrize("mode", MODES)
async def test_a_session_begun_before_the_sdk_continues_after_the_hand_over(
    machine: str, mode: str, gated: Gated
) -> None:
    watch = ListChanged()
    with anyio.fail_after(240):
        async with Client(gated.url, mode=mode, message_handler=watch.on_message) as client:
            assert (client.protocol_version == "2026-07-28") == (mode == "auto")
            async with watching(client, watch):  # 2026: a listen stream, acknowledged by the front
                assert await listed(client) == META_TOOLS
                assert gated.held(), "answered with the SDK's import held: by the front"
                gated.open_gate()  # the full app takes the session over
                found = await client.call_tool("find_tools", {"query": TOKYO})
                assert not found.is_error, found
                assert found.structured_content is not None
                assert TIME_TOOL in [t["name"] for t in found.structured_content["tools"]]
                await watch.wait(60)  # list_changed reached this client on the stream it opened early
                assert TIME_TOOL in await listed(client)  # the set published into the front's session
                called = await client.call_tool(TIME_TOOL, {"timezone": "Asia/Tokyo"})
                assert not called.is_error, called
    logs = gated.logs()
    assert "differs" not in logs and "could not hand" not in logs, logs[-3000:]


@pytest.fixture(scope="session")
def served_template(template_registry: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The template registry after one gateway served it: it left its ready table."""
    from .test_ready_table_e2e import launch, leave

    work = tmp_path_factory.mktemp("served")
    registry = work / "registry"
    shutil.copytree(template_registry, registry)
    manifest = work / "m.yaml"
    manifest.write_text(
        f"servers:\n  time:\n    command: {sys.executable}\n"
        "    args: [-m, mcp_server_time, --local-timezone, UTC]\n",
        encoding="utf-8",
    )
    serve = [TOOLWEAVE, "serve", "--manifest", str(manifest), "--registry", str(registry)]
    proc, client = launch(serve, work / "gateway.log")
    try:
        deadline = time.monotonic() + 180
        while not (registry / "ready-tools.json").exists() and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        leave(proc, client)
    assert (registry / "ready-tools.json").exists(), (work / "gateway.log").read_text()[-3000:]
    return registry


@pytest.mark.parametrize("mode", MODES)
async def test_what_the_front_offered_is_listed_at_once_and_after_the_hand_over(
    mode: str, served_template: Path, time_manifest: Path, tmp_path: Path
) -> None:
    """A ``find_tools`` the front answers from the ready table, the SDK's import held: the client hears
    ``list_changed`` (on the answer's response, or on the listen stream the front holds) and lists the
    tool at once, not once the gateway has loaded. The gateway then takes the session over with the same
    list (no answer of the front's differs from its replay) and runs the tool."""
    registry = tmp_path / "registry"
    shutil.copytree(served_template, registry)
    gated = Gated(tmp_path, time_manifest, registry)
    watch = ListChanged()
    try:
        with anyio.fail_after(120):
            async with (
                Client(gated.url, mode=mode, message_handler=watch.on_message) as client,
                watching(client, watch),
            ):
                assert await listed(client) == META_TOOLS
                found = await client.call_tool("find_tools", {"query": TOKYO})
                assert found.structured_content is not None, found
                offered = [t["name"] for t in found.structured_content["tools"]]
                assert offered and all(name.startswith("time__") for name in offered), offered
                assert found.structured_content["tool_list_changed"] is True
                await watch.wait(60)
                assert (await listed(client))[2:] == offered
                assert gated.held(), "answered with the SDK's import held: by the front"
                gated.open_gate()
                called = await client.call_tool(TIME_TOOL, {"timezone": "Asia/Tokyo"})
                assert not called.is_error, called
                now = await listed(client)  # the gateway's list, of the same session
                assert set(offered) | {TIME_TOOL} <= set(now), now
    finally:
        gated.open_gate()
        stop(gated.proc)
    logs = gated.logs()
    assert "differs" not in logs and "could not hand" not in logs, logs[-3000:]


async def test_raw_first_requests_in_both_eras_are_answered_while_start_up_is_held(gated: Gated) -> None:
    hello = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
    modern = {"MCP-Protocol-Version": "2026-07-28"}
    with anyio.fail_after(120):
        async with httpx.AsyncClient(timeout=120) as http:
            init = await http.post(
                gated.url,
                headers=ACCEPT,
                json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello},
            )
            assert init.status_code == 200 and init.json()["result"]["protocolVersion"] == "2025-11-25"
            session = {"Mcp-Session-Id": init.headers["mcp-session-id"], **ACCEPT}
            ping = await http.post(
                gated.url, headers=session, json={"jsonrpc": "2.0", "id": 2, "method": "ping"}
            )
            assert ping.json() == {"jsonrpc": "2.0", "id": 2, "result": {}}
            request = {
                "jsonrpc": "2.0",
                "id": 3,
                "method": "server/discover",
                "params": {"_meta": MODERN_META},
            }
            headers = {**ACCEPT, **modern, "Mcp-Method": "server/discover"}
            discover = await http.post(gated.url, headers=headers, json=request)
            assert discover.json()["result"]["supportedVersions"] == ["2026-07-28"]
            request = {"jsonrpc": "2.0", "id": 4, "method": "ping", "params": {"_meta": MODERN_META}}
            gone = await http.post(
                gated.url, headers={**ACCEPT, **modern, "Mcp-Method": "ping"}, json=request
            )
            assert gone.json()["error"]["code"] == -32601  # ping left the protocol with the handshake
            assert gated.held()
            gated.open_gate()
            # a call only the full app answers, on the session the front began: the session goes on
            call = {"name": "find_tools", "arguments": {"query": TOKYO}}
            found = await http.post(
                gated.url,
                headers=session,
                json={"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": call},
            )
            assert found.status_code == 200, found.text
            assert TIME_TOOL in found.text
            # and the SDK, which has taken over by now, gives the same answers as the front gave
            sdk_gone = await http.post(
                gated.url, headers={**ACCEPT, **modern, "Mcp-Method": "ping"}, json=request
            )
            assert (sdk_gone.status_code, sdk_gone.json()) == (gone.status_code, gone.json())


async def test_with_authentication_configured_nothing_is_answered_without_a_token(
    registry_copy: Path, tmp_path: Path
) -> None:
    token = "front-door-token"
    manifest = tmp_path / "m.yaml"
    digest = hashlib.sha256(token.encode()).hexdigest()
    manifest.write_text(
        json.dumps({"servers": {}, "security": {"auth": "tokens", "tokens": {"ci": f"sha256:{digest}"}}}),
        encoding="utf-8",
    )
    gateway = Gated(tmp_path, manifest, registry_copy, "--host", "0.0.0.0")
    hello = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
    body = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello}
    try:
        async with httpx.AsyncClient(timeout=120) as http:
            with anyio.move_on_after(5) as waited:  # held start-up: the front has no credentials to check
                await http.post(gateway.url, headers=ACCEPT, json=body)
            assert waited.cancelled_caught, "answered without a token while the gateway could not check one"
            assert gateway.held()
            gateway.open_gate()
            refused = await http.post(gateway.url, headers=ACCEPT, json=body)
            assert refused.status_code == 401
            bearer: dict[str, Any] = {**ACCEPT, "Authorization": f"Bearer {token}"}
            admitted = await http.post(gateway.url, headers=bearer, json=body)
            assert admitted.status_code == 200, admitted.text
    finally:
        gateway.open_gate()
        stop(gateway.proc)
