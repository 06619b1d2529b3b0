"""Prompt shutdown, end to end with real upstreams (mcp-server-time, mcp-server-git): a stdio gateway
whose client closed stdin, and an HTTP gateway stopped by SIGTERM while 50 sessions hold their streams
open, are gone soon after, and so is every upstream process they started (``server/fronts/shutdown.py``).

The bounds below are deadlines for the condition, several times the goals (stdin end: 1 s; SIGTERM:
5 s): before this work a stdio gateway took 5-50 s after stdin closed, and an HTTP gateway with 50
sessions holding streams open had not exited 200 s after SIGTERM. Each test also runs with every core
kept busy (``machine``).
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from contextlib import AsyncExitStack
from pathlib import Path

import anyio
import pytest
from mcp import Client

from tests.procs import alive, descendants

from .conftest import REPO, TOOLWEAVE, gateway_env, start_http_gateway, stop

pytestmark = [pytest.mark.integration]

STDIN_END_DEADLINE_S = 5.0
SIGTERM_DEADLINE_S = 20.0
SESSIONS = 50


def upstreams_manifest(path: Path) -> Path:
    py = sys.executable
    path.write_text(
        f"servers:\n"
        f"  time:\n    command: {py}\n    args: [-m, mcp_server_time, --local-timezone, UTC]\n"
        f"  git:\n    command: {py}\n    args: [-m, mcp_server_git, --repository, {REPO}]\n",
        encoding="utf-8",
    )
    return path


def left(pids: set[int]) -> set[int]:
    return {pid for pid in pids if alive(pid)}


def wait_for(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout:.0f} s")
        time.sleep(0.05)


def upstreams_connected(log: Path) -> bool:
    text = log.read_text(errors="replace")
    return "upstream 'time' connected" in text and "upstream 'git' connected" in text


def exits_within(proc: subprocess.Popen[bytes], deadline_s: float) -> float:
    started = time.monotonic()
    try:
        proc.wait(deadline_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise AssertionError(f"the gateway was still running {deadline_s:.0f} s later") from None
    return time.monotonic() - started


@pytest.mark.skipif(not Path("/proc/self").exists(), reason="reads the process tree from /proc")
def test_a_stdio_gateway_exits_with_its_upstreams_when_stdin_ends(
    machine: str, registry_copy: Path, tmp_path: Path
) -> None:
    manifest = upstreams_manifest(tmp_path / "m.yaml")
    log = tmp_path / "gateway.log"
    args = [TOOLWEAVE, "serve", "--manifest", str(manifest), "--registry", str(registry_copy)]
    with log.open("wb") as err:
        proc = subprocess.Popen(
            args, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=err, env=gateway_env()
        )
    assert proc.stdin is not None
    try:
        hello = {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        }
        proc.stdin.write(
            json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello}).encode()
        )
        proc.stdin.write(b"\n")
        proc.stdin.flush()
        wait_for(lambda: upstreams_connected(log), 120, "both upstreams connected")
        tree = descendants(proc.pid)
        assert len(tree) >= 2, tree  # the two upstream interpreters at least
        proc.stdin.close()
        took = exits_within(proc, STDIN_END_DEADLINE_S)
    finally:
        stop(proc)
    assert proc.returncode == 0, log.read_text(errors="replace")[-3000:]
    wait_for(lambda: not left(tree), 5, "no upstream process left")  # orphans are reaped by init
    print(f"{machine}: exited {took:.2f} s after stdin ended")


def test_a_client_that_leaves_before_the_gateway_is_built_starts_nothing(tmp_path: Path) -> None:
    manifest = upstreams_manifest(tmp_path / "m.yaml")
    hello = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
    request = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello}) + "\n"
    done = subprocess.run(
        [TOOLWEAVE, "serve", "--manifest", str(manifest), "--registry", str(tmp_path / "registry")],
        input=request.encode(),  # stdin ends right after the handshake
        capture_output=True,
        env=gateway_env(),
        timeout=120,
    )
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    assert json.loads(done.stdout.splitlines()[0])["id"] == 1  # answered by the early front
    assert b"connected" not in done.stderr and not (tmp_path / "registry").exists(), done.stderr[-3000:]


async def _hold_sessions(url: str, count: int, opened: anyio.Event, release: anyio.Event) -> None:
    """``count`` sessions holding a stream open until ``release``: every other one of the handshake era
    (its GET stream), the rest of the 2026 era with a ``subscriptions/listen`` stream, as Claude Code
    holds (a stream that never ends by itself: uvicorn waited for each to hang up)."""
    ready = 0

    async def one(n: int) -> None:
        nonlocal ready
        try:
            async with Client(url, mode="legacy" if n % 2 else "auto") as client:
                await client.list_tools()
                async with AsyncExitStack() as stack:
                    if not n % 2:
                        await stack.enter_async_context(client.listen(tools_list_changed=True))
                    ready += 1
                    if ready == count:
                        opened.set()
                    await release.wait()
        except Exception:  # the gateway going away under the session is the point of the test
            pass

    async with anyio.create_task_group() as tg:
        for n in range(count):
            tg.start_soon(one, n)


@pytest.mark.skipif(not Path("/proc/self").exists(), reason="reads the process tree from /proc")
@pytest.mark.anyio
async def test_sigterm_stops_an_http_gateway_with_50_sessions_and_its_upstreams(
    machine: str, registry_copy: Path, tmp_path: Path
) -> None:
    manifest = upstreams_manifest(tmp_path / "m.yaml")
    gateway = start_http_gateway(manifest, registry_copy, tmp_path / "gateway.log")
    try:
        await anyio.to_thread.run_sync(
            wait_for, lambda: upstreams_connected(gateway.log), 120, "both upstreams connected"
        )
        tree = descendants(gateway.proc.pid)
        opened, release = anyio.Event(), anyio.Event()
        async with anyio.create_task_group() as tg:
            tg.start_soon(_hold_sessions, gateway.url, SESSIONS, opened, release)
            with anyio.fail_after(120):
                await opened.wait()
            gateway.proc.send_signal(signal.SIGTERM)
            try:
                took = await anyio.to_thread.run_sync(exits_within, gateway.proc, SIGTERM_DEADLINE_S)
            finally:
                release.set()
    finally:
        stop(gateway.proc)
    await anyio.to_thread.run_sync(wait_for, lambda: not left(tree), 5, "no upstream process left")
    # the stop logs one line: no traceback, no uvicorn ERROR per open stream, no line per session
    log = (tmp_path / "gateway.log").read_text()
    after = log[log.index("signal 15: stopping") :].splitlines()
    assert [line for line in after if line.strip()] == [after[0]], "\n".join(after[:40])
    print(f"{machine}: exited {took:.2f} s after SIGTERM with {SESSIONS} sessions open")
