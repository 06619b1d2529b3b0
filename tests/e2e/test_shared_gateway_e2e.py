"""Sharing (``share_idle_s``, ``server/fronts/sharing.py``, ``server/fronts/bridge.py``) with real processes:
a first stdio launch starts the shared gateway and attaches to it; later launches of the same command attach
to it too (no launch starts an upstream), each as its own session; the shared gateway answers nothing
without its token, keeps its token in a 0600 file and stops by itself once idle. A 2026-era client's
launch, and a launch with another environment, serve their client themselves, as without sharing.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.procs import alive, descendants

from .conftest import TOOLWEAVE, gateway_env
from .test_startup_e2e import MODERN_META

pytestmark = [pytest.mark.integration]

TOKYO = "what time is it in Tokyo"
TIME_TOOL = "time__get_current_time"
HELLO = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
IDLE_S = 20


class Launch:
    """``toolweave serve`` over stdio, as a client that starts one per call does, spoken to line by line."""

    def __init__(self, manifest: Path, registry: Path, env: dict[str, str]) -> None:
        args = [TOOLWEAVE, "serve", "--manifest", str(manifest), "--registry", str(registry)]
        self.proc = subprocess.Popen(
            args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env
        )
        self.rid = 0

    def send(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.rid += 1
        message = {"jsonrpc": "2.0", "id": self.rid, "method": method, "params": params or {}}
        self.proc.stdin.write((json.dumps(message) + "\n").encode())
        self.proc.stdin.flush()
        while line := self.proc.stdout.readline():
            answer = json.loads(line)
            if answer.get("id") == self.rid:
                return dict(answer)
        raise AssertionError(f"the launch closed stdout before answering {method}")

    def notify(self, method: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write((json.dumps({"jsonrpc": "2.0", "method": method}) + "\n").encode())
        self.proc.stdin.flush()

    def hello(self) -> None:
        assert self.send("initialize", HELLO)["result"]["protocolVersion"] == "2025-11-25"
        self.notify("notifications/initialized")

    def listed(self) -> list[str]:
        return [t["name"] for t in self.send("tools/list")["result"]["tools"]]

    def find(self) -> list[str]:
        result = self.send("tools/call", {"name": "find_tools", "arguments": {"query": TOKYO}})["result"]
        return [t["name"] for t in (result.get("structuredContent") or {}).get("tools", [])]

    def close(self) -> None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.close()
        self.proc.wait(60)
        self.proc.stdout.close()  # warnings are errors: an unclosed pipe would fail a later test


def wait_for(check: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if found := check():
            return found
        time.sleep(0.2)
    raise AssertionError(f"{what}: not after {timeout} s")


def discovery(registry: Path) -> dict[str, Any] | None:
    try:
        return dict(json.loads((registry / "shared-gateway.json").read_text()))
    except (OSError, ValueError):
        return None


def test_launches_attach_to_one_shared_gateway_each_its_own_session(
    time_manifest: Path, registry_copy: Path
) -> None:
    env = {**gateway_env(), "TOOLWEAVE_SHARE_IDLE_S": str(IDLE_S)}
    first = Launch(time_manifest, registry_copy, env)
    try:
        first.hello()
        assert TIME_TOOL in first.find()  # through the shared gateway it started
        shared = discovery(registry_copy)
        assert shared is not None and not descendants(first.proc.pid)
    finally:
        first.close()
    assert stat.S_IMODE(os.stat(registry_copy / "shared-gateway.json").st_mode) == 0o600
    assert alive(shared["pid"])
    url = f"http://127.0.0.1:{shared['port']}/mcp"
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    body = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": HELLO}
    assert httpx.post(url, json=body, headers=headers, timeout=60).status_code == 401  # the token only

    a, b = Launch(time_manifest, registry_copy, env), Launch(time_manifest, registry_copy, env)
    try:
        a.hello()
        b.hello()
        assert TIME_TOOL in a.find()
        assert TIME_TOOL in a.listed()  # published into a's session ...
        assert TIME_TOOL not in b.listed()  # ... not into b's
        called = a.send(
            "tools/call",
            {"name": "call_tool", "arguments": {"name": TIME_TOOL, "arguments": {"timezone": "Asia/Tokyo"}}},
        )["result"]
        assert not called.get("isError") and "Asia/Tokyo" in json.dumps(called)
        assert TIME_TOOL in b.find()
        for launch in (a, b):  # bridges: the upstream runs under the shared gateway, not under them
            assert not descendants(launch.proc.pid)
    finally:
        a.close()
        b.close()
    assert a.proc.returncode == 0 and b.proc.returncode == 0
    wait_for(lambda: not alive(shared["pid"]), IDLE_S + 60, "the shared gateway stopped once idle")
    assert discovery(registry_copy) is None


def test_a_2026_era_launch_is_served_by_itself_and_other_commands_do_not_attach(
    time_manifest: Path, registry_copy: Path, tmp_path: Path
) -> None:
    env = {**gateway_env(), "TOOLWEAVE_SHARE_IDLE_S": str(IDLE_S)}
    first = Launch(time_manifest, registry_copy, env)
    first.hello()
    assert TIME_TOOL in first.find()
    first.close()
    shared = discovery(registry_copy)
    assert shared is not None
    try:
        modern = Launch(time_manifest, registry_copy, env)
        try:
            found = modern.send("server/discover", {"_meta": MODERN_META})
            assert found["result"]["supportedVersions"] == ["2026-07-28"]
        finally:
            modern.close()
        other_env = {**env, "SOME_SECRET": "another"}  # another environment: another gateway, cold
        other = Launch(time_manifest, registry_copy, other_env)
        try:
            other.hello()
            wait_for(lambda: descendants(other.proc.pid), 120, "the launch started its own upstream")
        finally:
            other.close()
    finally:
        # nothing attached to it here: on a busy machine it may have stopped once idle (IDLE_S) already
        with contextlib.suppress(ProcessLookupError):
            os.kill(shared["pid"], 15)
        wait_for(lambda: not alive(shared["pid"]), 60, "the shared gateway stopped on SIGTERM")
