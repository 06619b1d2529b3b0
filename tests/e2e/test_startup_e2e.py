"""Instant start end to end: `toolweave serve` over stdio answers the handshake and `tools/list` even
when its registry cannot be opened, and says why on stderr and in every find_tools/call result."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from tests.results import text

from .conftest import TOOLWEAVE, gateway_env
from .test_turnloop_e2e import time_manifest
from .watch import names

pytestmark = [pytest.mark.integration, pytest.mark.anyio]


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_registry_of_another_model_is_reported_not_hung(tmp_path: Path, mode: str) -> None:
    registry = tmp_path / "registry"
    registry.mkdir()
    (registry / "registry.json").write_text(
        json.dumps({"format": "toolweave-registry/1", "embedding_model": "acme/other-embedder", "dim": 384})
    )
    manifest = tmp_path / "m.yaml"
    manifest.write_text("servers:\n  gone:\n    command: toolweave-e2e-no-such-command\n")
    params = StdioServerParameters(
        command=TOOLWEAVE,
        args=["serve", "--manifest", str(manifest), "--registry", str(registry)],
        env=gateway_env(),
    )
    with (tmp_path / "gateway.log").open("w") as errlog:
        async with Client(stdio_client(params, errlog=errlog), mode=mode) as client:
            assert names(await client.list_tools(cache_mode="bypass")) == ["find_tools", "call_tool"]
            found = await client.call_tool("find_tools", {"query": "what time is it in Tokyo"})
            assert found.is_error
            message = text(found)
            prefix = "unavailable: the tool registry could not be opened: ModelMismatchError"
            assert message.startswith(prefix)
            assert "acme/other-embedder" in message and "toolweave reindex" in message
            called = await client.call_tool("gone__anything", {})
            assert text(called) == message
    logs = (tmp_path / "gateway.log").read_text()
    errors = [line for line in logs.splitlines() if " ERROR " in line and "could not be opened" in line]
    assert errors and "acme/other-embedder" in errors[0], logs[-3000:]


# The gateway process with the MCP SDK's import held at a gate until the test opens it: whatever it
# answers before that, it answered without the SDK.
GATED_SERVE = """
import os, sys, time
GATE = sys.argv.pop()
class Gate:
    def find_spec(self, name, path=None, target=None):
        if name in ("mcp", "mcp_types"):
            sys.meta_path.remove(self)
            deadline = time.monotonic() + 600  # longer than the test waits for any answer
            while not os.path.exists(GATE) and time.monotonic() < deadline:
                time.sleep(0.02)
        return None
sys.meta_path.insert(0, Gate())
from toolweave.__main__ import main
main()
"""


def start_gated(tmp_path: Path, args: list[str], env: dict[str, str]) -> tuple[subprocess.Popen[bytes], Path]:
    """``toolweave ARGS`` with the SDK's import held (``GATED_SERVE``) until the returned gate file exists;
    its log in ``tmp_path/gateway.log``."""
    gate = tmp_path / "sdk-may-load"
    with (tmp_path / "gateway.log").open("wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-c", GATED_SERVE, *args, str(gate)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log,
            env=env,
        )
    return proc, gate


class RawClient:
    """JSON-RPC lines over a gateway process's stdin/stdout, each read bounded by a deadline."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc = proc
        self.lines: queue.Queue[bytes] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(b"")

    def send(self, *messages: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(b"".join(json.dumps(m).encode() + b"\n" for m in messages))
        self.proc.stdin.flush()

    def receive(self) -> dict[str, Any]:
        line = self.lines.get(timeout=120)
        assert line, "the gateway closed stdout"
        message: dict[str, Any] = json.loads(line)  # stdout carries JSON-RPC and nothing else
        return message


def mismatched_registry(tmp_path: Path) -> Path:
    registry = tmp_path / "registry"
    registry.mkdir()
    (registry / "registry.json").write_text(
        json.dumps({"format": "toolweave-registry/1", "embedding_model": "acme/other-embedder", "dim": 384})
    )
    return registry


MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
}
HELLO = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
FIRST_CONTACT: dict[str, list[dict[str, Any]]] = {
    # what a handshake-era client sends first, and what Claude Code 2.1 (2026-07-28 era) sends first
    "handshake": [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": HELLO},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        {"jsonrpc": "2.0", "id": 3, "method": "ping"},
    ],
    "2026": [
        {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": MODERN_META}},
        {
            "jsonrpc": "2.0",
            "id": "listen:0",
            "method": "subscriptions/listen",
            "params": {"_meta": MODERN_META, "notifications": {"toolsListChanged": True}},
        },
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"_meta": MODERN_META}},
    ],
}


@pytest.mark.parametrize("era", sorted(FIRST_CONTACT))
def test_first_contact_is_answered_before_the_sdk_is_imported(tmp_path: Path, era: str) -> None:
    manifest = tmp_path / "m.yaml"
    manifest.write_text("servers: {}\n")
    args = ["serve", "--manifest", str(manifest), "--registry", str(mismatched_registry(tmp_path))]
    proc, gate = start_gated(tmp_path, args, gateway_env())
    client = RawClient(proc)
    try:
        messages = FIRST_CONTACT[era]
        client.send(*messages)
        answers = [client.receive() for _ in range(sum("id" in m for m in messages))]
        by_id = {a.get("id", a.get("method")): a for a in answers}
        if era == "handshake":
            assert by_id[1]["result"]["protocolVersion"] == "2025-06-18"
            assert by_id[3]["result"] == {}
        else:
            assert by_id[1]["result"]["supportedVersions"] == ["2026-07-28"]
            ack = by_id["notifications/subscriptions/acknowledged"]
            assert ack["params"]["notifications"] == {"toolsListChanged": True}
        assert by_id[1]["result"]["capabilities"] == {"tools": {"listChanged": True}}
        assert [t["name"] for t in by_id[2]["result"]["tools"]] == ["find_tools", "call_tool"]
        gate.touch()  # now the SDK loads and takes the session over
        call: dict[str, Any] = {"name": "find_tools", "arguments": {"query": "what time is it in Tokyo"}}
        if era == "2026":
            call["_meta"] = MODERN_META
        client.send({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": call})
        found = client.receive()  # the SDK's own replies to what the front answered never reach the client
        assert found["id"] == 4 and found["result"]["isError"], found
        assert "ModelMismatchError" in found["result"]["content"][0]["text"]
    finally:
        gate.touch()
        try:
            proc.communicate(timeout=60)  # closes stdin: the gateway exits at the end of its input
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, (tmp_path / "gateway.log").read_text()[-3000:]


def test_a_bad_manifest_still_fails_with_its_location_and_exit_code_1(tmp_path: Path) -> None:
    manifest = tmp_path / "bad.yaml"
    manifest.write_text("servers:\n  time:\n    command: 42\n    bogus: true\n")
    hello = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
    request = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello}) + "\n"
    done = subprocess.run(
        [TOOLWEAVE, "serve", "--manifest", str(manifest), "--registry", str(tmp_path / "registry")],
        input=request.encode(),
        capture_output=True,
        env=gateway_env(),
        timeout=120,
    )
    assert done.returncode == 1, done.stderr.decode()[-3000:]
    assert f"{manifest}:4:" in done.stderr.decode() and "bogus" in done.stderr.decode()
    for line in done.stdout.splitlines():  # at most the early handshake answer: JSON-RPC only
        assert json.loads(line)["id"] == 1


def test_the_hook_hands_its_prompt_to_a_gateway_still_starting_and_returns(
    machine: str, registry_copy: Path, tmp_path: Path
) -> None:
    """Claude Code runs its prompt hook while it starts the gateway. The gateway's host socket is bound
    before anything heavy is imported, so the prompt is handed over at once; the hook returns within
    its ``--wait`` however long the start takes, and the gateway applies the prompt once it runs: the
    client hears ``list_changed`` and lists the tool, before any ``find_tools``."""
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)
    env = {**gateway_env(), "XDG_RUNTIME_DIR": str(runtime)}
    manifest = time_manifest(tmp_path / "m.yaml")
    args = ["serve", "--manifest", str(manifest), "--registry", str(registry_copy)]
    proc, gate = start_gated(tmp_path, args, env)
    client = RawClient(proc)
    try:
        client.send(*FIRST_CONTACT["handshake"][:3])
        assert [client.receive()["id"] for _ in range(2)] == [1, 2]
        sockets = runtime / "toolweave"
        deadline = time.monotonic() + 60
        while not list(sockets.glob(f"host-{os.getpid()}-{proc.pid}.sock")):
            assert time.monotonic() < deadline, "the early front bound no host socket"
            time.sleep(0.05)
        event = {
            "session_id": "s",
            "hook_event_name": "UserPromptSubmit",
            "prompt": "what time is it in Tokyo",
        }
        started = time.monotonic()
        hooked = subprocess.run(
            [TOOLWEAVE, "hook", "claude-code", "--wait", "2"],
            input=json.dumps(event).encode(),
            capture_output=True,
            env=env,
            timeout=60,
        )
        took = time.monotonic() - started
        assert hooked.returncode == 0 and hooked.stdout == b"", hooked.stderr
        assert hooked.stderr == b""  # silent when it gives up: Claude Code shows a hook's stderr
        gate.touch()  # the gateway may start now: it finds the turn waiting on its socket
        notice = client.receive()
        assert notice == {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}, notice
        client.send({"jsonrpc": "2.0", "id": 3, "method": "tools/list"})
        listed = client.receive()
        assert "time__get_current_time" in [t["name"] for t in listed["result"]["tools"]], listed
        print(f"{machine}: the hook returned {took:.2f} s after it started")
    finally:
        gate.touch()
        try:
            proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
