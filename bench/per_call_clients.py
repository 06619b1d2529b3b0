"""Clients that start a gateway per call, with and without sharing (``share_idle_s``,
server/fronts/sharing.py).

langchain-mcp-adapters' ``MultiServerMCPClient.get_tools()`` and llama-index's ``BasicMCPClient`` open a new
MCP session, so over stdio a new ``toolweave serve``, for every call. Both pin ``mcp<2``, so they run from a
scratch venv (``--venv``, as bench/agent_frameworks.py builds it; llama-index-tools-mcp added). For each
setting (sharing off, on) and each client, on a fresh copy of a built registry (time upstream):

* langchain: ``get_tools()``, then 5 calls through the tools it returned: ``find_tools`` "what time is it
  in Tokyo", ``call_tool`` ``time__get_current_time`` Asia/Tokyo, alternately (find, call, find, call, find);
* llama-index: ``list_tools()``, then the same 5 calls with ``BasicMCPClient.call_tool``.

Each call's wall time from the client's side (spawn, handshake, call, the process's exit) and whether it was
answered: a find with the time tool among its tools, a call with Tokyo's time. Client defaults throughout.

    .venv/bin/python bench/per_call_clients.py [--venv /tmp/tw-lc-venv] [--json]

Only the standard library is imported at the top: the driver half runs in the scratch venv.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

TOKYO = "what time is it in Tokyo"
TOOL = "time__get_current_time"
PACKAGES = ["langchain-mcp-adapters>=0.3,<0.4", "langchain>=1.5,<2", "llama-index-tools-mcp>=0.4,<0.5"]
PLAN = ["find", "call", "find", "call", "find"]


def _answered(kind: str, text: str) -> bool:
    return TOOL in text if kind == "find" else "+09:00" in text


async def drive_langchain(command: str, args: list[str], env: dict[str, str]) -> list[dict[str, Any]]:
    from langchain_mcp_adapters.client import MultiServerMCPClient

    client = MultiServerMCPClient(
        {"tw": {"transport": "stdio", "command": command, "args": args, "env": env}}
    )
    rows: list[dict[str, Any]] = []
    t0 = time.perf_counter()
    tools = {t.name: t for t in await client.get_tools()}
    rows.append({"call": "get_tools", "s": time.perf_counter() - t0, "ok": "find_tools" in tools})
    for kind in PLAN:
        t0 = time.perf_counter()
        if kind == "find":
            out = await tools["find_tools"].ainvoke({"query": TOKYO})
        else:
            out = await tools["call_tool"].ainvoke({"name": TOOL, "arguments": {"timezone": "Asia/Tokyo"}})
        text = str(out)
        rows.append(
            {"call": kind, "s": time.perf_counter() - t0, "ok": _answered(kind, text), "text": text[:300]}
        )
    return rows


async def drive_llama(command: str, args: list[str], env: dict[str, str]) -> list[dict[str, Any]]:
    from llama_index.tools.mcp import BasicMCPClient

    client = BasicMCPClient(command, args=args, env=env)
    rows: list[dict[str, Any]] = []
    t0 = time.perf_counter()
    listed = await client.list_tools()
    names = [t.name for t in listed.tools]
    rows.append({"call": "list_tools", "s": time.perf_counter() - t0, "ok": "find_tools" in names})
    for kind in PLAN:
        t0 = time.perf_counter()
        if kind == "find":
            out = await client.call_tool("find_tools", {"query": TOKYO})
        else:
            out = await client.call_tool("call_tool", {"name": TOOL, "arguments": {"timezone": "Asia/Tokyo"}})
        text = json.dumps(out.model_dump(mode="json"))
        rows.append(
            {"call": kind, "s": time.perf_counter() - t0, "ok": _answered(kind, text), "text": text[:300]}
        )
    return rows


def driver_main(client: str, spec: str) -> None:
    command, args, env = json.loads(spec)
    drive = drive_langchain if client == "langchain" else drive_llama
    print(json.dumps(asyncio.run(drive(command, args, env))))


# --- the runner half: runs in toolweave's venv ------------------------------------------------------


def ensure_venv(venv: Path, packages: Sequence[str] = PACKAGES) -> Path:
    """The Python of a venv at ``venv`` holding ``packages`` (made on first use, niced)."""
    python = venv / "bin" / "python"
    if not python.exists():
        subprocess.run(["nice", "-n", "10", sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run(["nice", "-n", "10", str(python), "-m", "pip", "install", "-q", *packages], check=True)
    return python


def time_manifest(folder: Path) -> Path:
    """A manifest in ``folder`` with one upstream: mcp-server-time, on UTC (the clients' runs call it)."""
    manifest = folder / "m.yaml"
    manifest.write_text(
        f"servers:\n  time:\n    command: {sys.executable}\n"
        "    args: [-m, mcp_server_time, --local-timezone, UTC]\n",
        encoding="utf-8",
    )
    return manifest


def build_registry(serve: list[str], env: dict[str, str]) -> None:
    """One stdio start with sharing off: ingests the upstream's tools and stays until it has left its
    ready table (a registry served before; per-call launches alone may never stay that long)."""
    hello = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "b", "version": "1"}}
    lines = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "call_tool", "arguments": {"name": TOOL, "arguments": {"timezone": "UTC"}}},
        },
    ]
    proc = subprocess.Popen(
        serve, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env
    )
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(b"".join((json.dumps(m) + "\n").encode() for m in lines))
    proc.stdin.flush()
    while line := proc.stdout.readline():
        if json.loads(line).get("id") == 2:
            break
    ready = Path(serve[serve.index("--registry") + 1]) / "ready-tools.json"
    for _ in range(600):  # the gateway leaves its ready table once warm: what "served before" means
        if ready.exists():
            break
        time.sleep(0.1)
    proc.stdin.close()
    proc.wait(60)


def stop_shared(registry: Path) -> None:
    with_file = registry / "shared-gateway.json"
    try:
        pid = int(json.loads(with_file.read_text())["pid"])
    except (OSError, ValueError, KeyError):
        return
    os.kill(pid, signal.SIGTERM)
    for _ in range(100):
        if not Path(f"/proc/{pid}").exists():
            return
        time.sleep(0.1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--venv", type=Path, default=Path(tempfile.gettempdir()) / "tw-lc-venv")
    parser.add_argument("--idle", type=float, default=60.0, help="share_idle_s when sharing is on")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--driver", nargs=2, metavar=("CLIENT", "SPEC"), help=argparse.SUPPRESS)
    ns = parser.parse_args()
    if ns.driver:
        driver_main(*ns.driver)
        return
    python = ensure_venv(ns.venv)
    toolweave = str(Path(sys.executable).with_name("toolweave"))
    report: dict[str, Any] = {"load_1min": [round(os.getloadavg()[0], 2)], "runs": []}
    with tempfile.TemporaryDirectory(prefix="toolweave-per-call-") as tmp:
        manifest = time_manifest(Path(tmp))
        base_env = {**os.environ, "TOOLWEAVE_LOG_LEVEL": "WARNING"}
        built = Path(tmp) / "built"
        build_registry([toolweave, "serve", "--manifest", str(manifest), "--registry", str(built)], base_env)
        for sharing in ("off", "on"):
            for client in ("langchain", "llama-index"):
                registry = Path(tmp) / f"registry-{sharing}-{client}"
                shutil.copytree(built, registry)
                env = dict(base_env)
                if sharing == "on":
                    env["TOOLWEAVE_SHARE_IDLE_S"] = str(ns.idle)
                args = ["serve", "--manifest", str(manifest), "--registry", str(registry)]
                spec = json.dumps([toolweave, args, env])
                done = subprocess.run(
                    [str(python), __file__, "--driver", client, spec],
                    stdout=subprocess.PIPE,
                    stderr=subprocess.DEVNULL,
                    timeout=900,
                    check=False,
                )
                stop_shared(registry)
                if done.returncode != 0:
                    report["runs"].append({"sharing": sharing, "client": client, "error": done.returncode})
                    continue
                rows = json.loads(done.stdout.decode().strip().splitlines()[-1])
                calls = [r["s"] for r in rows[1:]]
                report["runs"].append(
                    {
                        "sharing": sharing,
                        "client": client,
                        "answered": f"{sum(r['ok'] for r in rows)}/{len(rows)}",
                        "ok": [r["ok"] for r in rows],
                        "unanswered": [r["text"] for r in rows if not r["ok"]],
                        "first_s": round(rows[0]["s"], 2),
                        "calls_s": [round(s, 2) for s in calls],
                        "calls_p50_s": round(statistics.median(calls), 2),
                        "all_p50_s": round(statistics.median([r["s"] for r in rows]), 2),
                    }
                )
    report["load_1min"].append(round(os.getloadavg()[0], 2))
    print(json.dumps(report, indent=None if ns.json else 2))


if __name__ == "__main__":
    main()
