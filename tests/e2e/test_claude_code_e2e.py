"""Claude Code itself (the npm package, 2.1.332) against the gateway, set up as docs/clients.md says: the
model is a scripted Messages endpoint on 127.0.0.1 (``tests/claude_code.py``), the gateway is added with
``claude mcp add`` (stdio, or a running gateway over streamable HTTP), and ``claude -p "what time is it in
Tokyo" --allowedTools mcp__toolweave`` runs once per test, on the machine as it is and with every core
kept busy (``machine``). The registry was served before (its ready table is there), as a user's is from
their second session on.

What a user sees is checked: the model's first request carries ``find_tools`` and ``call_tool`` (a server
still "pending" would have them deferred); its first ``find_tools`` returns the time tool (not "still
starting"); the found tool reaches the model (listed, or held behind Claude Code's tool search), not only
the ``call_tool`` fallback; and the call comes back with Tokyo's time. Skipped without node/npm or when
npm cannot install Claude Code (offline).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.claude_code import (
    PROMPT,
    SERVER,
    TIME_TOOL,
    ScriptedModel,
    add_toolweave,
    claude_env,
    install_claude_code,
    serve_in_thread,
)
from tests.net import free_port

from .conftest import TOOLWEAVE, gateway_env, start_http_gateway, stop
from .test_turnloop_e2e import time_manifest

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

HELLO = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "setup", "version": "1"}}


@pytest.fixture(scope="session")
def claude() -> str:
    """``claude``, installed once into the test cache (like the TypeScript SDK's tests)."""
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "toolweave-tests"
    binary, why = install_claude_code(cache / "claude-code-2.1.332")
    if binary is None:
        pytest.skip(why)
    return binary


@pytest.fixture(scope="module")
def served_registry(template_registry: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The time manifest's registry after one stdio session: a call served, the ready table left."""
    folder = tmp_path_factory.mktemp("served")
    registry = folder / "registry"
    shutil.copytree(template_registry, registry)
    manifest = time_manifest(folder / "m.yaml")
    call = {"name": "call_tool", "arguments": {"name": TIME_TOOL, "arguments": {"timezone": "UTC"}}}
    lines = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": HELLO},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call},
    ]
    serve = [TOOLWEAVE, "serve", "--manifest", str(manifest), "--registry", str(registry)]
    proc = subprocess.Popen(
        serve, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=gateway_env()
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        proc.stdin.write(b"".join(json.dumps(m).encode() + b"\n" for m in lines))
        proc.stdin.flush()
        while line := proc.stdout.readline():
            if json.loads(line).get("id") == 2:
                break
        assert (registry / "ready-tools.json").exists()  # left at the first ingest, before the call
    finally:
        proc.stdin.close()
        try:
            proc.wait(timeout=60)
        finally:
            stop(proc)
            proc.stdout.close()
    yield registry


def run_claude(claude: str, work: Path, target: list[str] | str) -> tuple[ScriptedModel, str]:
    """One ``claude -p`` with the gateway added as docs/clients.md says; the model's record and Claude
    Code's stderr."""
    model = ScriptedModel()
    port = free_port()
    server = serve_in_thread(model.app, port)
    try:
        env = claude_env(
            work / "home",
            ANTHROPIC_BASE_URL=f"http://127.0.0.1:{port}",
            ANTHROPIC_API_KEY="sk-ant-scripted",
            TOOLWEAVE_LOG_LEVEL="INFO",
        )
        add_toolweave(claude, work, env, target, "local")
        command = [claude, "-p", PROMPT, "--allowedTools", f"mcp__{SERVER}", "--output-format", "json"]
        done = subprocess.run(
            [*command, "--model", "claude-sonnet-4-5"],
            env=env,
            cwd=str(work),
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        return model, done.stderr
    finally:
        server.should_exit = True


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_claude_code_finds_and_calls_the_time_tool(
    machine: str, transport: str, claude: str, served_registry: Path, tmp_path: Path
) -> None:
    registry = tmp_path / "registry"
    shutil.copytree(served_registry, registry)
    manifest = time_manifest(tmp_path / "m.yaml")
    # no cwd of its own for the gateway: Claude Code starts it in the project folder, a fresh one here
    work = Path(tempfile.mkdtemp(dir=tmp_path, prefix="project-"))
    serve = [TOOLWEAVE, "serve", "--manifest", str(manifest), "--registry", str(registry)]
    gateway = None
    try:
        if transport == "http":
            # a gateway the user started (docs/clients.md), with the environment a shell gives it
            gateway = start_http_gateway(manifest, registry, tmp_path / "gateway.log", patient=False)
            target: list[str] | str = gateway.url
        else:
            target = serve  # Claude Code spawns it, with the environment it gives its servers
        model, stderr = run_claude(claude, work, target)
    finally:
        if gateway is not None:
            stop(gateway.proc)
    said = f"outcome {model.outcome}; found {model.found}; stderr {stderr[-1500:]}"
    assert model.first_has_meta_tools, said  # connected before the first model request
    assert model.found and model.restarts == 0, said  # answered at once: no "still starting"
    assert TIME_TOOL in model.found[0], said
    assert model.outcome in ("direct", "deferred"), said  # the found tool reached the model
    assert model.called is not None and "Asia/Tokyo" in model.called, said
