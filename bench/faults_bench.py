"""Fault benchmark: memory and time the gateway spends on hostile upstreams and inputs.

1. Huge result: ``toolweave serve`` (stdio) in front of ``tests/upstreams/faulty.py`` over stdio and
   over streamable HTTP; a client calls ``huge`` (a 50 MiB text answer). The gateway's peak RSS growth
   during that call is read from ``/proc/PID/status`` (``VmHWM`` after resetting it through
   ``/proc/PID/clear_refs``, minus ``VmRSS`` just before the call). Goal: < 100 MB.
2. Billion laughs: a nine-level YAML alias bomb as a manifest (``load_manifest``) and as an OpenAPI
   spec (``parse_document``), each in a fresh interpreter; time of the call itself and the process's
   peak RSS. Goal: error in < 1 s, RSS < 300 MB.

Usage: .venv/bin/python bench/faults_bench.py [--mb 50] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters

REPO = Path(__file__).resolve().parents[1]
FAULTY = str(REPO / "tests" / "upstreams" / "faulty.py")
TOOLWEAVE = str(Path(sys.executable).parent / "toolweave")


def _status_kb(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/{pid}/status")


def _gateway_pid(upstream_marker: str) -> int:
    """The ``toolweave serve`` process (the child of the SDK's spawn), found through /proc."""
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmd = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if (
                any(b"toolweave" in c for c in cmd[:2])
                and b"serve" in cmd
                and upstream_marker.encode() in b" ".join(cmd)
            ):
                return int(entry.name)
    raise RuntimeError("toolweave serve process not found")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def huge_result(transport: str, mb: float, work: Path, cap: int | None) -> dict[str, Any]:
    http: subprocess.Popen[bytes] | None = None
    if transport == "stdio":
        server = f"    transport: stdio\n    command: {sys.executable}\n    args: [{FAULTY}, stdio]\n"
    else:
        port = _free_port()
        http = subprocess.Popen([sys.executable, FAULTY, "http", str(port)])
        server = f"    transport: http\n    url: http://127.0.0.1:{port}/mcp\n"
    manifest = work / f"faulty-{transport}.yaml"
    manifest.write_text(f"servers:\n  faulty:\n{server}")
    registry = work / f"registry-{transport}"
    params = StdioServerParameters(
        command=TOOLWEAVE,
        args=["serve", "--manifest", str(manifest), "--registry", str(registry)],
        env={"TOOLWEAVE_MAX_RESULT_BYTES": str(cap)} if cap else None,
    )
    try:
        async with Client(params, mode="legacy") as client:
            for _ in range(200):  # the upstream connects after the gateway answers initialize
                if "faulty__huge" in {t.name for t in (await client.list_tools(cache_mode="bypass")).tools}:
                    break
                await client.call_tool("find_tools", {"query": "huge answer"})
                await anyio.sleep(0.1)
            await client.call_tool("call_tool", {"name": "faulty__echo", "arguments": {"text": "warm"}})
            pid = _gateway_pid(str(manifest))
            Path(f"/proc/{pid}/clear_refs").write_text("5")  # reset VmHWM to the current RSS
            before = _status_kb(pid, "VmRSS")
            started = time.perf_counter()
            result = await client.call_tool("call_tool", {"name": "faulty__huge", "arguments": {"n": mb}})
            seconds = time.perf_counter() - started
            peak = _status_kb(pid, "VmHWM")
            text = result.content[0].text  # type: ignore[union-attr]
    finally:
        if http is not None:
            http.kill()
    return {
        "transport": transport,
        "max_result_bytes": cap or "default",
        "result_mib": mb,
        "rss_before_mb": round(before / 1024, 1),
        "peak_growth_mb": round((peak - before) / 1024, 1),
        "seconds": round(seconds, 2),
        "answer": text[:160],
    }


_LAUGHS = """
import resource, sys, time
from pathlib import Path
lines = ['l0: &l0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
lines += [f"l{i}: &l{i} [{', '.join([f'*l{i-1}'] * 10)}]" for i in range(1, 10)]
bomb = chr(10).join(lines) + chr(10)
kind = sys.argv[1]
if kind == "manifest":
    from toolweave.manifest import load_manifest
    path = Path(sys.argv[2]); path.write_text("servers: {}" + chr(10) + bomb)
    call = lambda: load_manifest(path)
else:
    from toolweave.adapters.openapi.loader import parse_document
    spec = "openapi: 3.0.0" + chr(10) + "paths: {}" + chr(10) + bomb
    call = lambda: parse_document(spec, "laughs.yaml")
started = time.perf_counter()
try:
    call()
    error = None
except Exception as exc:
    error = f"{type(exc).__name__}: {exc}"
seconds = time.perf_counter() - started
print(repr((seconds, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, error)))
"""


def billion_laughs(kind: str, work: Path) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "-c", _LAUGHS, kind, str(work / "laughs.yaml")],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    seconds, peak_mb, error = eval(out.stdout.strip().splitlines()[-1])  # our own repr() above
    return {"input": kind, "seconds": round(seconds, 3), "peak_rss_mb": round(peak_mb, 1), "error": error}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=50.0)
    parser.add_argument("--json", action="store_true")
    parser.add_argument(
        "--compare-cap",
        type=int,
        default=128 * 1024 * 1024,
        help="also run with this max_result_bytes (enough to read the whole answer: the cost without a cap)",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        rows = [
            anyio.run(huge_result, t, args.mb, work, cap)
            for cap in (None, args.compare_cap)
            for t in ("stdio", "http")
        ]
        laughs = [billion_laughs(kind, work) for kind in ("manifest", "openapi")]
    if args.json:
        print(json.dumps({"huge_result": rows, "billion_laughs": laughs}, indent=2))
        return
    print(f"machine: {os.cpu_count()} cores, Python {sys.version.split()[0]}")
    print("| upstream | max_result_bytes | result | RSS before | peak growth | seconds | answer |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['transport']} | {r['max_result_bytes']} | {r['result_mib']:g} MiB | "
            f"{r['rss_before_mb']} MB | {r['peak_growth_mb']} MB | {r['seconds']} | {r['answer'][:90]} |"
        )
    print("\n| alias bomb as | seconds (the call) | peak RSS | error |")
    print("|---|---|---|---|")
    for r in laughs:
        print(f"| {r['input']} | {r['seconds']} | {r['peak_rss_mb']} MB | {(r['error'] or '')[:100]} |")


if __name__ == "__main__":
    main()
