"""First useful answer: spawn `toolweave serve` on the demo manifest with its registry already
built -> handshake -> the first `find_tools` for "what time is it in Tokyo" that returns
``time__get_current_time`` first. Raw JSON-RPC lines over stdio, raw HTTP over streamable HTTP (no client
library in the measured path), p50/p95 over repeated starts; the find is sent right after the handshake
and, if an answer names no tools, sent again (as a model would) until one does: the figure is the time
to the first answer that returns tools (``right`` counts those that return ``WANTED``), and ``retries``
counts the answers before it.

HTTP also counts refused connections: the client connects from the moment the process is spawned,
retrying every 5 ms while refused (the port is bound by ``toolweave.__main__`` before anything heavy).
With ``--activate`` the bench binds the port itself and passes it as systemd's socket activation does
(``tests/net.py``, ``server/fronts/address.py``): nothing is then refused from the instant of spawn.

``--unworded`` asks "which hour is it in Japan right now" instead: none of its words is in the time
tool's text, so the ready table's BM25 finds nothing for it, and only a vector ranking (the ready
table's, once its query encoder is loaded, or the gateway's own) returns the time tool. The find is then
sent again (every 50 ms) until an answer returns ``WANTED``: the figure is when vector-ranked answers
begin, counted from spawn.

Usage: .venv/bin/python bench/first_find.py [--runs 10] [--transport stdio|http|both] [--activate] [--busy]
       [--unworded] [--json]
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
from functools import partial
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from gateway_bench import TOOLWEAVE, machine, pct  # noqa: E402
from startup import demo_registry  # noqa: E402

from tests.busy import cpu_hogs  # noqa: E402
from tests.net import free_port, listening_socket, spawn_activated  # noqa: E402

QUERY = "what time is it in Tokyo"
UNWORDED = "which hour is it in Japan right now"
WANTED = "time__get_current_time"
GIVE_UP_S = 60.0
RETRY_S = 0.05
"""Between two finds while waiting for the right tool (``--unworded``)."""
_asked = {"query": QUERY, "until_right": False}


def _line(rid: int, method: str, params: dict[str, Any]) -> bytes:
    return (json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}) + "\n").encode()


INIT = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}
INITIALIZED = (json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n").encode()


def _find_params() -> dict[str, Any]:
    return {"name": "find_tools", "arguments": {"query": _asked["query"]}}


def _done(first: bool | None) -> bool:
    """Whether an answer ends the run: one with tools, or with ``--unworded`` one with ``WANTED``."""
    if _asked["until_right"]:
        if first is not True:
            time.sleep(RETRY_S)
        return first is True
    return first is not None


def _first_tool(result: dict[str, Any]) -> bool | None:
    """None when the answer names no tools; else whether ``WANTED`` is among the tools it returns."""
    tools = (result.get("structuredContent") or {}).get("tools") or []
    return any(t["name"] == WANTED for t in tools) if tools else None


def _env() -> dict[str, str]:
    return dict(os.environ, TOOLWEAVE_LOG_LEVEL=os.environ.get("TOOLWEAVE_LOG_LEVEL", "WARNING"))


def _stop(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(OSError):
        proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def stdio_start(manifest: Path, registry: Path, stderr: Any) -> dict[str, Any]:
    args = [*TOOLWEAVE.split(), "serve", "--manifest", str(manifest), "--registry", str(registry)]
    pipe = subprocess.PIPE
    t0 = time.perf_counter()
    proc = subprocess.Popen(args, stdin=pipe, stdout=pipe, stderr=stderr, env=_env())
    assert proc.stdin is not None and proc.stdout is not None

    def answer(rid: int) -> dict[str, Any]:
        assert proc.stdout is not None
        while line := proc.stdout.readline():
            message = json.loads(line)
            if message.get("id") == rid:
                return dict(message.get("result") or {})
        raise RuntimeError("the gateway closed stdout before answering")

    try:
        proc.stdin.write(_line(1, "initialize", INIT))
        proc.stdin.flush()
        answer(1)
        handshake = time.perf_counter() - t0
        proc.stdin.write(INITIALIZED)
        rid, retries, first = 2, 0, None
        while time.perf_counter() - t0 < GIVE_UP_S:
            proc.stdin.write(_line(rid, "tools/call", _find_params()))
            proc.stdin.flush()
            first = _first_tool(answer(rid))
            if _done(first):
                break
            retries += 1
            rid += 1
        found = time.perf_counter() - t0
        return {"handshake_s": handshake, "find_s": found, "retries": retries, "right": first}
    finally:
        proc.stdin.close()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            _stop(proc)


def _post(port: int, body: dict[str, Any], session: str | None) -> tuple[dict[str, Any], str | None]:
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    if session:
        headers["Mcp-Session-Id"] = session
        headers["Mcp-Protocol-Version"] = "2025-11-25"
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=GIVE_UP_S)
    try:
        conn.request("POST", "/mcp", json.dumps(body), headers)
        response = conn.getresponse()
        raw = response.read().decode()
        sid = response.getheader("Mcp-Session-Id") or session
    finally:
        conn.close()
    if not raw.strip():
        return {}, sid  # a notification's 202
    if raw.lstrip().startswith("{"):
        return json.loads(raw), sid
    for line in raw.splitlines():  # an SSE stream: the data line with the answer
        if line.startswith("data:") and '"id"' in line:
            return json.loads(line[5:]), sid
    raise RuntimeError(f"no answer in {raw[:200]!r}")


def http_start(manifest: Path, registry: Path, stderr: Any, activate: bool = False) -> dict[str, Any]:
    passed = listening_socket() if activate else None
    port = free_port() if passed is None else passed.getsockname()[1]
    args = [*TOOLWEAVE.split(), "serve", "--manifest", str(manifest), "--registry", str(registry)]
    args += ["--transport", "http", "--port", str(port)]
    streams: dict[str, Any] = {"stdin": subprocess.DEVNULL, "stdout": subprocess.DEVNULL, "stderr": stderr}
    t0 = time.perf_counter()
    if passed is None:
        proc = subprocess.Popen(args, env=_env(), **streams)
    else:
        proc = spawn_activated(passed, args, env=_env(), **streams)
        passed.close()  # the gateway holds it now
    refused = 0
    try:
        while True:  # connect as soon as the process exists: every refusal is counted
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=GIVE_UP_S):
                    break
            except ConnectionRefusedError:
                refused += 1
                if proc.poll() is not None or time.perf_counter() - t0 > GIVE_UP_S:
                    raise RuntimeError("the gateway never listened") from None
                time.sleep(0.005)
        listening = time.perf_counter() - t0
        _, session = _post(port, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT}, None)
        handshake = time.perf_counter() - t0
        _post(port, {"jsonrpc": "2.0", "method": "notifications/initialized"}, session)
        rid, retries, first = 2, 0, None
        while time.perf_counter() - t0 < GIVE_UP_S:
            body = {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": _find_params()}
            answer, session = _post(port, body, session)
            first = _first_tool(answer.get("result") or {})
            if _done(first):
                break
            retries += 1
            rid += 1
        found = time.perf_counter() - t0
        return {
            "listening_s": listening,
            "refused": refused,
            "handshake_s": handshake,
            "find_s": found,
            "retries": retries,
            "right": first,
        }
    finally:
        _stop(proc)


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {"runs": len(rows), "right": sum(bool(r["right"]) for r in rows)}
    for key in rows[0]:
        if key.endswith("_s"):
            values = [r[key] for r in rows]
            out[f"{key[:-2]}_p50_s"] = round(statistics.median(values), 3)
            out[f"{key[:-2]}_p95_s"] = round(pct(values, 0.95), 3)
            out[f"{key[:-2]}_max_s"] = round(max(values), 3)
    out["retries"] = sum(r["retries"] for r in rows)
    if "refused" in rows[0]:
        out["refused_probes"] = sum(1 for r in rows if r["refused"])
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--transport", choices=("stdio", "http", "both"), default="both")
    parser.add_argument("--activate", action="store_true", help="HTTP: pass the port bound")
    parser.add_argument("--busy", action="store_true", help="hog every core meanwhile (tests/busy.py)")
    parser.add_argument("--stderr", help="append the gateways' stderr to this file")
    parser.add_argument("--unworded", action="store_true", help="time to the first vector-ranked answer")
    parser.add_argument("--json", action="store_true")
    ns = parser.parse_args()
    if ns.unworded:
        _asked.update(query=UNWORDED, until_right=True)
    manifest, registry = demo_registry()
    report: dict[str, Any] = {
        "machine": machine(),
        "busy": ns.busy,
        "query": _asked["query"],
        "until_right": _asked["until_right"],
        "activate": ns.activate,
    }
    http_one = partial(http_start, activate=ns.activate)
    with open(ns.stderr or os.devnull, "ab") as stderr:
        # warm-up: builds the registry on a first run, fills the OS cache, and waits for the gateway's
        # own search, so that the registry's ready table is the full one (vectors, edges)
        asked = dict(_asked)
        _asked.update(query=UNWORDED, until_right=True)
        stdio_start(manifest, registry, stderr)
        _asked.update(asked)
        with cpu_hogs() if ns.busy else contextlib.nullcontext():
            load = os.getloadavg()[0]
            for transport, one in (("stdio", stdio_start), ("http", http_one)):
                if ns.transport in (transport, "both"):
                    report[transport] = summary([one(manifest, registry, stderr) for _ in range(ns.runs)])
            report["load_1min"] = [round(load, 2), round(os.getloadavg()[0], 2)]
    print(json.dumps(report, indent=None if ns.json else 2))


if __name__ == "__main__":
    main()
