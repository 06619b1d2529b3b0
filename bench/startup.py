"""Startup benchmark: spawn `toolweave serve` over stdio -> first request answered (`initialize` of the
handshake era, `server/discover` of the 2026 era) -> first `tools/list` answered, p50/p95 over repeated
starts, in both protocol eras, through the SDK's client and as raw JSON-RPC lines (with CPU times).

Two manifests:

* ``10k``: the ToolLinkOS catalog plus synthesised tools (10,000 tools in all, built once with the real
  embedder and cached under ``bench/out/startup/``, which git ignores) and mcp-server-time as an upstream;
* ``demo``: ``manifests/demo.yaml`` with its own registry (cached beside the other).

Usage: .venv/bin/python bench/startup.py [--runs 10] [--skip-10k] [--skip-demo] [--raw-only] [--busy] [--json]
Needs ../shared/datasets/toollinkos beside the repository for the 10k run (skipped without it).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from gateway_bench import (  # noqa: E402
    TIME_ARGS,
    TOOLLINKOS,
    TOOLWEAVE,
    catalog_manifest,
    machine,
    pct,
    registry_size,
)

from tests.busy import cpu_hogs  # noqa: E402

REPO = HERE.parent
OUT = HERE / "out" / "startup"
TOTAL_TOOLS = 10_000
TOOLLINKOS_TOOLS = 573


def build_10k() -> tuple[Path, Path]:
    """The 10k manifest and its registry, ingested once (minutes of embedding) and then reused."""
    from toolweave.manifest import load_manifest
    from toolweave.registry import Registry, load_catalog
    from toolweave.settings import Settings

    OUT.mkdir(parents=True, exist_ok=True)
    registry = OUT / "registry-10k"
    manifest = catalog_manifest(OUT, "tenk", TOTAL_TOOLS - TOOLLINKOS_TOOLS)
    with manifest.open("a") as f:
        f.write(f"servers:\n  time:\n    command: {sys.executable}\n    args: {json.dumps(TIME_ARGS)}\n")
    done = OUT / "registry-10k.done"
    if done.exists():
        return manifest, registry
    loaded = load_manifest(manifest)
    reg = Registry.open(registry, settings=Settings(home=registry))
    try:
        for entry in loaded.catalogs:
            catalog = load_catalog([entry.path], entry.source, require_description=entry.require_description)
            print(reg.ingest(entry.source, catalog.tools, catalog.edges), file=sys.stderr, flush=True)
        assert len(reg) >= TOTAL_TOOLS, len(reg)
    finally:
        reg.close()
    done.write_text(time.strftime("%Y-%m-%d %H:%M UTC\n", time.gmtime()))
    return manifest, registry


def demo_registry() -> tuple[Path, Path]:
    """``manifests/demo.yaml`` and a registry of its own (the first start ingests the upstreams' tools)."""
    OUT.mkdir(parents=True, exist_ok=True)
    return REPO / "manifests" / "demo.yaml", OUT / "registry-demo"


COMMAND = [TOOLWEAVE]
"""What is started: ``toolweave`` of this environment, or ``--command`` (e.g. an older export's)."""


def params(manifest: Path, registry: Path) -> StdioServerParameters:
    env = dict(os.environ, TOOLWEAVE_LOG_LEVEL="WARNING")
    return StdioServerParameters(
        command=COMMAND[0],
        args=[*COMMAND[1:], "serve", "--manifest", str(manifest), "--registry", str(registry)],
        env=env,
    )


async def one_start(manifest: Path, registry: Path, mode: str) -> tuple[float, float, int]:
    """Seconds from spawn to the answered handshake and to the answered first ``tools/list``."""
    t0 = time.perf_counter()
    # The gateway's stderr (and its upstreams', cut off mid-start when the client leaves) is not data.
    with open(os.devnull, "w") as quiet:
        return await _timed(Client(stdio_client(params(manifest, registry), errlog=quiet), mode=mode), t0)


async def _timed(connecting: Client, t0: float) -> tuple[float, float, int]:
    async with connecting as client:
        handshake = time.perf_counter() - t0
        listed = await client.list_tools(cache_mode="bypass")
        first_list = time.perf_counter() - t0
    return handshake, first_list, len(listed.tools)


async def starts(manifest: Path, registry: Path, runs: int) -> dict[str, Any]:
    report: dict[str, Any] = {}
    await one_start(manifest, registry, "legacy")  # warm the OS file cache and any first-start ingest
    for mode in ("legacy", "auto"):
        handshake: list[float] = []
        first_list: list[float] = []
        for _ in range(runs):
            h, f, listed = await one_start(manifest, registry, mode)
            handshake.append(h)
            first_list.append(f)
        era = "2025-11-25 (initialize)" if mode == "legacy" else "2026-07-28 (server/discover)"
        report[mode] = {
            "era": era,
            "runs": runs,
            "handshake_p50_s": round(statistics.median(handshake), 3),
            "handshake_p95_s": round(pct(handshake, 0.95), 3),
            "first_tools_list_p50_s": round(statistics.median(first_list), 3),
            "first_tools_list_p95_s": round(pct(first_list, 0.95), 3),
            "tools_in_first_list": listed,
        }
    return report


def _cpu_s(pid: int, *, thread: bool = True) -> float:
    """CPU seconds (user + system) the process's main thread (``thread``), or the whole process, has
    used so far: far less sensitive to machine load than wall-clock time, so starts can be compared on a
    busy machine. Since the early front (a thread) answers the handshake, the process's CPU time is the
    figure to compare; the main thread's is kept for comparison with earlier runs."""
    where = f"/proc/{pid}/task/{pid}/stat" if thread else f"/proc/{pid}/stat"
    fields = Path(where).read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _cpu_figures(pid: int, stage: str) -> dict[str, float]:
    return {f"{stage}_cpu_s": _cpu_s(pid), f"{stage}_process_cpu_s": _cpu_s(pid, thread=False)}


def _request(rid: int, method: str, params: dict[str, Any]) -> bytes:
    return (json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}) + "\n").encode()


def _answer(proc: subprocess.Popen[bytes], rid: int) -> None:
    assert proc.stdout is not None
    while line := proc.stdout.readline():
        if json.loads(line).get("id") == rid:
            return
    raise RuntimeError("the gateway closed stdout before answering")


ERAS = ("2025-11-25", "2026-07-28")
"""The handshake era (``initialize`` first) and the 2026 era (``server/discover`` first, as Claude Code
2.1 starts)."""


def _first_contact(era: str) -> list[bytes]:
    """What a client of ``era`` sends first: its opening request (id 1), then a ``tools/list`` (id 2)."""
    client = {"name": "bench", "version": "1"}
    if era == "2026-07-28":
        meta = {
            "io.modelcontextprotocol/protocolVersion": era,
            "io.modelcontextprotocol/clientInfo": client,
            "io.modelcontextprotocol/clientCapabilities": {},
        }
        return [_request(1, "server/discover", {"_meta": meta}), _request(2, "tools/list", {"_meta": meta})]
    init = {"protocolVersion": era, "capabilities": {}, "clientInfo": client}
    note = (json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n").encode()
    return [_request(1, "initialize", init), note + _request(2, "tools/list", {})]


def raw_start(manifest: Path, registry: Path, era: str = ERAS[0]) -> dict[str, float]:
    """One start spoken as raw JSON-RPC lines: seconds from spawn to the answered first request
    (``initialize`` or ``server/discover``) and to the answered first ``tools/list``, with the gateway's
    CPU time (upstreams not counted) at each. The list is sent once the first answer came."""
    env = dict(os.environ, TOOLWEAVE_LOG_LEVEL="WARNING")
    args = [*COMMAND, "serve", "--manifest", str(manifest), "--registry", str(registry)]
    pipe = subprocess.PIPE
    opening, listing = _first_contact(era)
    t0 = time.perf_counter()
    proc = subprocess.Popen(args, stdin=pipe, stdout=pipe, stderr=subprocess.DEVNULL, env=env)
    assert proc.stdin is not None
    try:
        proc.stdin.write(opening)
        proc.stdin.flush()
        _answer(proc, 1)
        out = {"handshake_s": time.perf_counter() - t0, **_cpu_figures(proc.pid, "handshake")}
        proc.stdin.write(listing)
        proc.stdin.flush()
        _answer(proc, 2)
        out |= {"first_list_s": time.perf_counter() - t0, **_cpu_figures(proc.pid, "first_list")}
        return out
    finally:
        proc.stdin.close()
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def raw_starts(manifest: Path, registry: Path, runs: int) -> dict[str, Any]:
    """``runs`` raw starts per era (after one warm-up), p50 and p95 of each figure."""
    raw_start(manifest, registry)  # warm-up: the OS file cache, any first-start ingest
    report: dict[str, Any] = {}
    for era in ERAS:
        rows = [raw_start(manifest, registry, era) for _ in range(runs)]
        report[era] = {
            "first_request": "server/discover" if era == "2026-07-28" else "initialize",
            "runs": runs,
            **{f"{k}_p50": round(statistics.median(r[k] for r in rows), 3) for k in rows[0]},
            **{f"{k}_p95": round(pct([r[k] for r in rows], 0.95), 3) for k in rows[0]},
        }
    return report


async def main(args: argparse.Namespace) -> dict[str, Any]:
    report: dict[str, Any] = {"machine": machine()}
    if args.skip_10k:
        pass
    elif TOOLLINKOS.exists():
        manifest, registry = build_10k()
        timed = {} if args.raw_only else await starts(manifest, registry, args.runs)
        timed["raw"] = raw_starts(manifest, registry, args.runs)
        report["registry_10k"] = {"tools": registry_size(registry), **timed}
        print(json.dumps({"registry_10k": report["registry_10k"]}), flush=True)
    else:
        print(f"skipped the 10k run: {TOOLLINKOS} is absent", file=sys.stderr)
    if not args.skip_demo:
        manifest, registry = demo_registry()
        timed = {} if args.raw_only else await starts(manifest, registry, args.runs)
        timed["raw"] = raw_starts(manifest, registry, args.runs)
        report["demo"] = timed
        print(json.dumps({"demo": report["demo"]}), flush=True)
    report["load_after"] = os.getloadavg()[0]
    return report


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=10, help="timed starts per manifest and protocol era")
    parser.add_argument("--skip-10k", action="store_true", help="only the demo manifest")
    parser.add_argument("--skip-demo", action="store_true", help="only the 10k-tool registry")
    parser.add_argument("--raw-only", action="store_true", help="only the raw JSON-RPC starts with CPU times")
    parser.add_argument("--build-only", action="store_true", help="build the cached 10k registry and stop")
    parser.add_argument("--json", action="store_true", help="print the whole report as one JSON document")
    parser.add_argument(
        "--command", help="the gateway command to start instead of this environment's toolweave (shell words)"
    )
    parser.add_argument(
        "--busy", action="store_true", help="keep every core busy with CPU hogs meanwhile (tests/busy.py)"
    )
    ns = parser.parse_args()
    if ns.command:
        COMMAND[:] = shlex.split(ns.command)
    if ns.build_only:
        print(build_10k())
        sys.exit(0)
    with cpu_hogs() if ns.busy else contextlib.nullcontext():
        result = anyio.run(main, ns)
    result["busy"] = ns.busy
    if ns.json:
        print(json.dumps(result, indent=2))
