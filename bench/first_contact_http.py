"""First contact over streamable HTTP: spawn ``toolweave serve --transport http`` on the demo manifest, then
time, from the spawn: (a) the port accepting a connection, (b) the answer to the era's opening request
(``server/discover`` for 2026-07-28, ``initialize`` for 2025-11-25) sent the moment a connection is
accepted, and (c) the answer to the first ``tools/list`` (sent once (b) came), with the number of tools it
listed. p50 / p95 over ``--runs`` spawns per era, after one warm-up start (the OS file cache, the first
ingest of the demo registry).

The requests are raw HTTP/1.1 (``http.client``), as a client sends them: ``Accept: application/json,
text/event-stream``; the 2026 era's carry ``MCP-Protocol-Version`` and the ``_meta`` envelope, the
handshake era's ``tools/list`` its ``Mcp-Session-Id``. A refused connection is tried again every 10 ms
(what a client that retries would see; the gateway binds its port first thing, so none should be).

With ``--delay S`` the opening request is sent S seconds after the spawn instead (a client that comes
while the gateway opens its registry, loads its embedder and starts its upstreams), and
``answer_after_sending_s`` is the figure to read.

Usage: .venv/bin/python bench/first_contact_http.py [--runs 10] [--busy] [--delay S] [--command CMD] [--json]
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import shlex
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from ports import free_port  # noqa: E402

from tests.busy import cpu_hogs  # noqa: E402

REPO = HERE.parent
OUT = HERE / "out" / "first_contact_http"
TOOLWEAVE = str(Path(sys.executable).with_name("toolweave"))
COMMAND = [TOOLWEAVE]
ERAS = ("2025-11-25", "2026-07-28")
CLIENT = {"name": "first-contact-bench", "version": "1"}
TIMEOUT_S = 120.0


def _meta(era: str) -> dict[str, Any]:
    return {
        "io.modelcontextprotocol/protocolVersion": era,
        "io.modelcontextprotocol/clientInfo": CLIENT,
        "io.modelcontextprotocol/clientCapabilities": {},
    }


def opening(era: str) -> tuple[dict[str, Any], dict[str, str]]:
    """The era's first request and its headers."""
    if era == "2026-07-28":
        body: dict[str, Any] = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "server/discover",
            "params": {"_meta": _meta(era)},
        }
        return body, {"MCP-Protocol-Version": era, "Mcp-Method": body["method"]}
    params = {"protocolVersion": era, "capabilities": {}, "clientInfo": CLIENT}
    return {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params}, {}


def listing(era: str, session: str | None) -> tuple[dict[str, Any], dict[str, str]]:
    if era == "2026-07-28":
        body: dict[str, Any] = {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/list",
            "params": {"_meta": _meta(era)},
        }
        return body, {"MCP-Protocol-Version": era, "Mcp-Method": body["method"]}
    headers = {"MCP-Protocol-Version": era}
    if session:
        headers["Mcp-Session-Id"] = session
    return {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}, headers


def connect(
    port: int, proc: subprocess.Popen[bytes], deadline: float
) -> tuple[http.client.HTTPConnection, int]:
    """A connection to the gateway (refused ones tried again every 10 ms) and how many were refused."""
    refused = 0
    while True:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=TIMEOUT_S)
        try:
            conn.connect()
            return conn, refused
        except ConnectionRefusedError:
            refused += 1
            conn.close()
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the gateway did not listen on {port} (exit {proc.returncode})") from None
            time.sleep(0.01)


def post(
    conn: http.client.HTTPConnection, body: dict[str, Any], headers: dict[str, str]
) -> tuple[dict[str, Any], dict[str, str]]:
    """POST one JSON-RPC request to /mcp; its reply (JSON or the first SSE ``data:`` line) and headers."""
    conn.request(
        "POST",
        "/mcp",
        json.dumps(body),
        {"Content-Type": "application/json", "Accept": "application/json, text/event-stream", **headers},
    )
    response = conn.getresponse()
    kind = response.getheader("content-type", "")
    if kind.startswith("text/event-stream"):  # a POST's stream ends with its reply
        replies = [json.loads(line[5:]) for line in response.read().splitlines() if line.startswith(b"data:")]
        reply: dict[str, Any] = next((r for r in replies if r.get("id") == body["id"]), {})
    else:
        reply = json.loads(response.read())
    if response.status != 200 or "result" not in reply:
        raise RuntimeError(f"{body['method']}: HTTP {response.status}: {reply}")
    return reply, {k.lower(): v for k, v in response.getheaders()}


def one_start(manifest: Path, registry: Path, era: str, delay_s: float = 0.0) -> dict[str, float]:
    port = free_port()
    env = dict(os.environ, TOOLWEAVE_LOG_LEVEL="WARNING")
    args = [*COMMAND, "serve", "--manifest", str(manifest), "--registry", str(registry)]
    args += ["--transport", "http", "--port", str(port)]
    t0 = time.perf_counter()
    proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    try:
        conn, refused = connect(port, proc, time.monotonic() + TIMEOUT_S)
        out: dict[str, float] = {"port_s": time.perf_counter() - t0, "refused": refused}
        time.sleep(max(0.0, delay_s - (time.perf_counter() - t0)))
        sent = time.perf_counter()
        body, headers = opening(era)
        _, answered = post(conn, body, headers)
        out["first_answer_s"] = time.perf_counter() - t0
        out["answer_after_sending_s"] = time.perf_counter() - sent
        body, headers = listing(era, answered.get("mcp-session-id"))
        reply, _ = post(conn, body, headers)
        out["first_list_s"] = time.perf_counter() - t0
        out["tools_listed"] = len(reply["result"]["tools"])
        conn.close()
        return out
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def starts(runs: int, delay_s: float = 0.0) -> dict[str, Any]:
    OUT.mkdir(parents=True, exist_ok=True)
    manifest, registry = REPO / "manifests" / "demo.yaml", OUT / "registry-demo"
    one_start(manifest, registry, ERAS[0])  # warm-up
    report: dict[str, Any] = {}
    for era in ERAS:
        rows = [one_start(manifest, registry, era, delay_s) for _ in range(runs)]
        report[era] = {
            "first_request": "server/discover" if era == "2026-07-28" else "initialize",
            "runs": runs,
            **{f"{k}_p50": round(statistics.median(r[k] for r in rows), 3) for k in rows[0]},
            **{f"{k}_p95": round(pct([r[k] for r in rows], 0.95), 3) for k in rows[0]},
            "refused_total": sum(int(r["refused"]) for r in rows),
        }
        print(json.dumps({era: report[era]}), flush=True)
    return report


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=10, help="timed spawns per protocol era")
    parser.add_argument(
        "--busy", action="store_true", help="CPU hogs on every core meanwhile (tests/busy.py)"
    )
    parser.add_argument(
        "--command", help="the gateway command to start instead of this environment's (shell words)"
    )
    parser.add_argument("--json", action="store_true", help="print the whole report as one JSON document")
    parser.add_argument(
        "--delay",
        type=float,
        default=0.0,
        help="send the opening request this long after the spawn (a client that connects while the gateway "
        "opens its registry and starts its upstreams), not the moment the port accepts",
    )
    ns = parser.parse_args()
    if ns.command:
        COMMAND[:] = shlex.split(ns.command)
    load_before = os.getloadavg()[0]
    with cpu_hogs() if ns.busy else contextlib.nullcontext():
        report = starts(ns.runs, ns.delay)
    report |= {
        "delay_s": ns.delay,
        "busy": ns.busy,
        "load_before": load_before,
        "load_after": os.getloadavg()[0],
    }
    report["host"] = socket.gethostname()
    if ns.json:
        print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
