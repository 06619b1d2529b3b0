"""A registry served only by launches that end with their one call still gets a ready table: the next
launch answers its first ``find_tools`` from it (before the MCP SDK is even imported)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from .conftest import gateway_env
from .test_startup_e2e import HELLO, RawClient

pytestmark = [pytest.mark.integration]

FIND = {"name": "find_tools", "arguments": {"query": "what time is it in Tokyo"}}

# `toolweave serve` with the import of the modules named by its last argument held until the file named
# by the one before it exists: it shows what the gateway did without them. The import, once reached,
# leaves a file named like the gate with ".reached" added.
GATED = """
import os, sys, time
MODULES, GATE = sys.argv.pop().split(","), sys.argv.pop()
class Gate:
    def find_spec(self, name, path=None, target=None):
        if name in MODULES:
            sys.meta_path.remove(self)
            open(GATE + ".reached", "w").close()
            deadline = time.monotonic() + 600  # longer than the test waits for anything
            while not os.path.exists(GATE) and time.monotonic() < deadline:
                time.sleep(0.02)
        return None
sys.meta_path.insert(0, Gate())
from toolweave.__main__ import main
main()
"""


def found_names(answer: dict[str, Any]) -> list[str]:
    """The tools a ``find_tools`` answer offers: those it describes, then those it names as also found."""
    doc = answer["result"]["structuredContent"]
    return [t["name"] for t in doc.get("tools", [])] + list(doc.get("also_found", {}))


def one_call_launch(
    command: list[str], log: Path, answered: Callable[[], None] = lambda: None
) -> tuple[dict[str, Any], int]:
    """A per-call client's launch: handshake, one ``find_tools``, stdin closed as soon as it is answered
    (``answered`` is called just before). Its answer and the gateway's exit status."""
    proc, client = launch(command, log)
    try:
        client.send({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": FIND})
        answer = client.receive()
        while "id" not in answer:  # a list_changed notice may come first
            answer = client.receive()
    finally:
        answered()
        leave(proc, client)
    return answer, proc.returncode


def launch(command: list[str], log: Path) -> tuple[subprocess.Popen[bytes], RawClient]:
    """A gateway process with its handshake done."""
    with log.open("ab") as err:
        proc = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, env=gateway_env(patient=False)
        )
    client = RawClient(proc)
    client.send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": HELLO})
    assert client.receive()["id"] == 1
    client.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    return proc, client


def leave(proc: subprocess.Popen[bytes], client: RawClient) -> None:
    """What a per-call client does once it has its answer: close stdin; the gateway then exits."""
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.close()
    try:
        proc.wait(timeout=120)
    except subprocess.TimeoutExpired:  # killed here: a process left running fails a later test instead
        proc.kill()
        proc.wait(timeout=30)
        raise
    finally:
        while client.lines.get(timeout=60):  # the reader saw the end of stdout: it may be closed
            pass
        proc.stdout.close()


def test_a_launch_that_ends_before_the_model_loads_leaves_the_table_the_next_answers_from(
    tmp_path: Path, time_manifest: Path, registry_copy: Path
) -> None:
    table = registry_copy / "ready-tools.json"
    assert not table.exists()  # built by the registry API: no gateway served it yet
    serve = ["serve", "--manifest", str(time_manifest), "--registry", str(registry_copy)]
    log = tmp_path / "gateway.log"

    # The first launch never gets its embedding model (its import is held): a launch a per-call client
    # ends within seconds, on a busy machine, before the model is up. It still leaves the table once its
    # registry is open.
    model_gate = tmp_path / "model-may-load"
    proc, client = launch([sys.executable, "-c", GATED, *serve, str(model_gate), "fastembed"], log)
    try:
        deadline = time.monotonic() + 120
        while not table.exists() and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.1)
        assert table.exists(), log.read_text()[-3000:]
    finally:
        model_gate.touch()
        leave(proc, client)
    assert proc.returncode == 0, log.read_text()[-3000:]
    rows = json.loads(table.read_text())["tools"]
    assert {"time__get_current_time", "time__convert_time"} <= {r["name"] for r in rows}

    # The next launch, with the MCP SDK's import held: its first find_tools is answered from the table by
    # the early front, with the time tool, no "still starting". (The import is let go once the answer
    # came, as a real one ends by itself; the next test shows the launch ends without it.)
    sdk_gate = tmp_path / "sdk-may-load"
    try:
        answer, status = one_call_launch(
            [sys.executable, "-c", GATED, *serve, str(sdk_gate), "mcp,mcp_types"], log, sdk_gate.touch
        )
    finally:
        sdk_gate.touch()
    assert "time__get_current_time" in found_names(answer), answer
    assert status == 0, log.read_text()[-3000:]


def test_a_client_that_leaves_while_the_sdk_is_imported_ends_the_launch_at_once(
    tmp_path: Path, time_manifest: Path, registry_copy: Path
) -> None:
    # A per-call client has its handshake from the early front and leaves; the MCP SDK's import is held
    # throughout (a real one costs a busy machine seconds of CPU that the client's next launch needs).
    # The gateway ends while the import still waits, not after it: nothing was started that it would cut.
    serve = ["serve", "--manifest", str(time_manifest), "--registry", str(registry_copy)]
    log = tmp_path / "gateway.log"
    sdk_gate = tmp_path / "sdk-may-load"  # never created while the test waits
    proc, client = launch([sys.executable, "-c", GATED, *serve, str(sdk_gate), "mcp,mcp_types"], log)
    reached = tmp_path / "sdk-may-load.reached"
    try:
        deadline = time.monotonic() + 120
        while not reached.exists() and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        assert reached.exists(), log.read_text()[-3000:]  # the main thread waits in the import now
        leave(proc, client)
    finally:
        sdk_gate.touch()  # lets a gateway that did not end go on to its own exit
    assert proc.returncode == 0, log.read_text()[-3000:]
    assert not (registry_copy / "ready-tools.json").exists()  # it never served: nothing was written


def test_a_registrys_first_launch_leaves_the_table_even_if_it_ends_at_its_first_answer(
    tmp_path: Path, time_manifest: Path
) -> None:
    # A registry's very first launch builds it: its tools come from the upstream once the gateway is
    # up. A client that leaves as soon as it has its answer (a one-shot `claude -p`, a per-call client)
    # ends it at once. The table must already be there, or the next launch waits for the start again.
    registry = tmp_path / "registry"
    serve = [sys.executable, "-m", "toolweave", "serve", "--manifest", str(time_manifest)]
    log = tmp_path / "gateway.log"
    with log.open("ab") as err:
        proc = subprocess.Popen(
            [*serve, "--registry", str(registry)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=err,
            env=gateway_env(patient=True),  # this find waits for the start: nothing else could answer it
        )
    client = RawClient(proc)
    try:
        client.send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": HELLO})
        assert client.receive()["id"] == 1
        client.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        client.send({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": FIND})
        answer = client.receive()
        while "id" not in answer:
            answer = client.receive()
    finally:
        leave(proc, client)
    assert "time__get_current_time" in found_names(answer), answer
    assert proc.returncode == 0, log.read_text()[-3000:]
    table = registry / "ready-tools.json"
    assert table.exists(), log.read_text()[-3000:]
    assert "time__get_current_time" in {r["name"] for r in json.loads(table.read_text())["tools"]}


UNWORDED = {"name": "find_tools", "arguments": {"query": "which hour is it in Japan right now"}}
"""None of its words is in the time tool's text: the table's BM25 does not offer the tool, its vectors do."""


def test_a_launch_ranks_with_the_tables_vectors_before_lancedb_is_imported(
    tmp_path: Path, time_manifest: Path, registry_copy: Path
) -> None:
    table = registry_copy / "ready-tools.json"
    serve = ["serve", "--manifest", str(time_manifest), "--registry", str(registry_copy)]
    log = tmp_path / "gateway.log"
    proc, client = launch([sys.executable, "-m", "toolweave", *serve], log)  # leaves the full table
    try:
        deadline = time.monotonic() + 120
        while not (table.exists() and "search" in json.loads(table.read_text())):
            assert time.monotonic() < deadline and proc.poll() is None, log.read_text()[-3000:]
            time.sleep(0.1)
    finally:
        leave(proc, client)

    # LanceDB's import held: the registry never opens, the gateway's own search never runs. Asked
    # again and again, the launch answers from the table: by BM25 first, then with the table's vectors
    # and the query encoder, which offer the time tool.
    gate = tmp_path / "lancedb-may-load"
    proc, client = launch([sys.executable, "-c", GATED, *serve, str(gate), "lancedb"], log)
    answers: list[list[str]] = []
    try:
        deadline = time.monotonic() + 120
        while not answers or "time__get_current_time" not in answers[-1]:
            assert time.monotonic() < deadline and proc.poll() is None, (answers, log.read_text()[-3000:])
            client.send(
                {"jsonrpc": "2.0", "id": 2 + len(answers), "method": "tools/call", "params": UNWORDED}
            )
            answer = client.receive()
            while "id" not in answer:  # list_changed notices
                answer = client.receive()
            answers.append(found_names(answer))
            time.sleep(0.1)
        assert not gate.exists()  # all of it before LanceDB was imported
    finally:
        gate.touch()
        leave(proc, client)
