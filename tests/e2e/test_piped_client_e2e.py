"""A stdio client that closes stdin after its last request still gets every answer
(``server/fronts/owed.py``): ``printf '...' | toolweave serve``, a replay harness, a script writing a
batch. Closing stdin says "nothing more to send", not "stop listening"; before this, such a client got
its handshake and nothing else.

A client that leaves altogether (stdin and stdout closed) is not waited for: the gateway exits within
the same bound as with nothing in flight, though the call it left behind runs for a minute.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from .conftest import TOOLWEAVE, UPSTREAMS, gateway_env
from .test_shutdown_e2e import STDIN_END_DEADLINE_S, exits_within, wait_for
from .test_startup_e2e import HELLO, MODERN_META

pytestmark = [pytest.mark.integration]

FIND = {"name": "find_tools", "arguments": {"query": "what time is it in Tokyo"}}
TOKYO = {
    "name": "call_tool",
    "arguments": {"name": "time__get_current_time", "arguments": {"timezone": "Asia/Tokyo"}},
}
SLOW = {"name": "dyn__slow", "arguments": {"seconds": 1}}


def manifest(path: Path) -> Path:
    py = sys.executable
    path.write_text(
        f"servers:\n"
        f"  time:\n    command: {py}\n    args: [-m, mcp_server_time, --local-timezone, UTC]\n"
        f'  dyn:\n    command: {py}\n    args: ["{UPSTREAMS / "dynamic.py"}", stdio]\n',
        encoding="utf-8",
    )
    return path


def batch(era: str) -> list[dict[str, Any]]:
    """A whole conversation, written at once: handshake, a search, a meta-tool call, a direct call."""
    calls = [FIND, TOKYO, SLOW]
    if era == "handshake":
        opening: list[dict[str, Any]] = [
            {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": HELLO},
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
        ]
        envelope: dict[str, Any] = {}
    else:
        opening = [{"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": MODERN_META}}]
        envelope = {"_meta": MODERN_META}
    requests = [
        {"jsonrpc": "2.0", "id": 2 + n, "method": "tools/call", "params": {**call, **envelope}}
        for n, call in enumerate(calls)
    ]
    return opening + requests


def start(tmp_path: Path, registry: Path) -> tuple[subprocess.Popen[bytes], Path]:
    log = tmp_path / "gateway.log"
    args = [TOOLWEAVE, "serve", "--manifest", str(manifest(tmp_path / "m.yaml")), "--registry", str(registry)]
    with log.open("wb") as err:
        proc = subprocess.Popen(
            args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, env=gateway_env()
        )
    return proc, log


def answers_until_exit(proc: subprocess.Popen[bytes], log: Path, last: bytes) -> dict[Any, dict[str, Any]]:
    """Write ``last``, close stdin, and return every answer the gateway wrote before it exited, by id
    (stdout carries JSON-RPC and nothing else)."""
    try:
        out, _ = proc.communicate(last, timeout=180)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise AssertionError(
            f"the gateway did not exit:\n{log.read_text(errors='replace')[-3000:]}"
        ) from None
    messages = [json.loads(line) for line in out.splitlines()]
    return {m["id"]: m for m in messages if "id" in m}


def text_of(answer: dict[str, Any]) -> str:
    assert "result" in answer, answer
    result = answer["result"]
    assert not result.get("isError"), result
    return "".join(part.get("text", "") for part in result["content"])


@pytest.mark.parametrize("era", ["handshake", "2026"])
@pytest.mark.parametrize("when", ["at-once", "once-serving"])
def test_a_client_that_closes_stdin_after_its_requests_gets_every_answer(
    machine: str, registry_copy: Path, tmp_path: Path, era: str, when: str
) -> None:
    """``at-once``: the batch and the end of input reach the early front, before the SDK is imported;
    ``once-serving``: they reach the gateway once its upstreams are connected."""
    proc, log = start(tmp_path, registry_copy)
    assert proc.stdin is not None
    messages = batch(era)
    if when == "once-serving":
        proc.stdin.write(json.dumps(messages[0]).encode() + b"\n")
        proc.stdin.flush()
        wait_for(lambda: "upstream 'dyn' connected" in log.read_text(errors="replace"), 120, "dyn connected")
        messages = messages[1:]
    answers = answers_until_exit(proc, log, b"".join(json.dumps(m).encode() + b"\n" for m in messages))

    assert sorted(answers) == [1, 2, 3, 4], answers
    found = json.loads(text_of(answers[2]))
    assert "time__get_current_time" in [t["name"] for t in found["tools"]]
    assert json.loads(text_of(answers[3]))["timezone"] == "Asia/Tokyo"
    assert text_of(answers[4]) == "slept"
    assert proc.returncode == 0


def test_a_client_gone_altogether_is_not_waited_for(
    machine: str, registry_copy: Path, tmp_path: Path
) -> None:
    proc, log = start(tmp_path, registry_copy)
    assert proc.stdin is not None and proc.stdout is not None
    opening, *_ = batch("handshake")
    proc.stdin.write(json.dumps(opening).encode() + b"\n")
    proc.stdin.flush()
    assert json.loads(proc.stdout.readline())["id"] == 1
    wait_for(lambda: "upstream 'dyn' connected" in log.read_text(errors="replace"), 120, "dyn connected")
    slow = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {**SLOW, "arguments": {"seconds": 60}},
    }
    proc.stdin.write(json.dumps(slow).encode() + b"\n")
    proc.stdin.flush()
    time.sleep(0.5)  # the call is under way (a call not read yet would be the same: nobody reads its answer)
    proc.stdout.close()
    proc.stdin.close()
    took = exits_within(proc, STDIN_END_DEADLINE_S * 2)
    assert took < 30, took  # the call's own 60 s, let alone call_timeout_s, were not waited out
