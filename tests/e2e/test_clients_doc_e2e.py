"""The MCP Inspector commands of docs/clients.md that no other test runs: a search over stdio, and a
list over streamable HTTP (the stdio list and `call_tool` are in test_gateway_e2e.py). Each runs the
documented command line, with the test's own registry."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from .conftest import TOOLWEAVE, gateway_env, start_http_gateway, stop
from .test_turnloop_e2e import TOKYO, time_manifest

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(shutil.which("npx") is None, reason="the MCP Inspector CLI needs node/npx"),
]

INSPECTOR = ["npx", "-y", "@modelcontextprotocol/inspector", "--cli"]


def inspector(*args: str) -> dict[str, Any]:
    env = gateway_env(patient=False)  # only what the documented command says
    run = subprocess.run([*INSPECTOR, *args], capture_output=True, text=True, timeout=180, env=env)
    if run.returncode != 0 and "ENOTFOUND" in run.stderr + run.stdout:
        pytest.skip("npx could not download the MCP Inspector (offline, empty npm cache)")
    assert run.returncode == 0, run.stderr[-2000:]
    answer: dict[str, Any] = json.loads(run.stdout)
    return answer


def test_inspector_search_over_stdio(machine: str, registry_copy: Path, tmp_path: Path) -> None:
    """A one-shot client always meets a gateway that is starting: the documented command tells it to
    wait for the start (``TOOLWEAVE_STARTUP_CALL_WAIT_S=0``), so the search is answered, busy machine
    included (``machine``)."""
    manifest = time_manifest(tmp_path / "m.yaml")
    serve = [TOOLWEAVE, "serve", "--manifest", str(manifest), "--registry", str(registry_copy)]
    search = ["--method", "tools/call", "--tool-name", "find_tools", "--tool-arg", f"query={TOKYO}"]
    found = inspector("-e", "TOOLWEAVE_STARTUP_CALL_WAIT_S=0", *serve, *search)
    doc = json.loads(found["content"][0]["text"])
    assert "time__get_current_time" in [t["name"] for t in doc["tools"]], doc


def test_inspector_list_over_http(registry_copy: Path, tmp_path: Path) -> None:
    gateway = start_http_gateway(time_manifest(tmp_path / "m.yaml"), registry_copy, tmp_path / "gw.log")
    try:
        listed = inspector(gateway.url, "--transport", "http", "--method", "tools/list")
    finally:
        stop(gateway.proc)
    assert [t["name"] for t in listed["tools"]][:2] == ["find_tools", "call_tool"]
