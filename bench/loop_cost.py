"""The gateway's own cost per operation, as CPU time: what a loaded machine does not blur.

``gateway_bench.py`` times the loop end to end; on a shared machine its wall-clock figures measure the
neighbours as much as the gateway. This runner gives the CPU time (user + system, every thread) the
``toolweave serve`` process spends per proxied call of mcp-server-time's ``get_current_time`` (both
protocol eras) and per ``find_tools`` over the ToolLinkOS catalog (573 tools, ToolLinkOS user queries in
file order), with the same loops and helpers as ``gateway_bench.py``. ``--source DIR`` runs the gateway
from another checkout of toolweave (e.g. ``git archive main | tar -x -C /tmp/base``) with this venv, so two
versions can be compared back to back on the same machine: alternate the runs.

Usage: .venv/bin/python bench/loop_cost.py [--calls 600] [--queries 300] [--source DIR] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
from gateway_bench import (
    TIME_ARGS,
    TOOLLINKOS,
    catalog_manifest,
    child_with,
    cpu_s,
    pct,
    publish,
    queries,
    until_ready,
)
from mcp import Client, StdioServerParameters

# Runs ``toolweave`` from the checkout TOOLWEAVE_SOURCE instead of this one (installed editable: its
# directory is on sys.path, and must go, or it would be found first).
_LAUNCH = (
    "import os, sys; src, this = os.environ['TOOLWEAVE_SOURCE'], os.environ['TOOLWEAVE_INSTALLED']; "
    "sys.path = [src] + [p for p in sys.path if os.path.realpath(p or '.') != this]; "
    "import toolweave; assert toolweave.__file__.startswith(src), toolweave.__file__; "
    "from toolweave.__main__ import main; sys.argv = ['toolweave', *sys.argv[1:]]; main()"
)
REPO = Path(__file__).resolve().parents[1]


def params(manifest: Path, registry: Path, source: Path | None) -> StdioServerParameters:
    env = dict(os.environ, TOOLWEAVE_LOG_LEVEL="WARNING")
    serve = ["serve", "--manifest", str(manifest), "--registry", str(registry)]
    if source is None:
        return StdioServerParameters(command=sys.executable, args=["-m", "toolweave", *serve], env=env)
    env.update(TOOLWEAVE_SOURCE=str(source.resolve()), TOOLWEAVE_INSTALLED=str(REPO))
    return StdioServerParameters(command=sys.executable, args=["-c", _LAUNCH, *serve], env=env)


async def calls(work: Path, n: int, mode: str, source: Path | None) -> dict[str, Any]:
    manifest = work / f"time-{mode}.yaml"
    manifest.write_text(
        f"servers:\n  time:\n    command: {sys.executable}\n    args: {json.dumps(TIME_ARGS)}\n"
        f"    protocol: {mode}\n"
    )
    registry = work / f"registry-time-{mode}"
    args = {"timezone": "Europe/Paris"}
    async with Client(params(manifest, registry, source), mode=mode) as gateway:
        pid = child_with(str(registry))
        await publish(gateway, "current time in a timezone", "time__get_current_time")
        for _ in range(30):  # warm-up
            await gateway.call_tool("time__get_current_time", args)
        cpu, started = cpu_s(pid), time.perf_counter()
        for _ in range(n):
            assert not (await gateway.call_tool("time__get_current_time", args)).is_error
        return {
            "calls": n,
            "gateway_cpu_ms_per_call": round((cpu_s(pid) - cpu) * 1000 / n, 3),
            "wall_ms_per_call_loaded": round((time.perf_counter() - started) * 1000 / n, 2),
        }


async def finds(work: Path, n: int, source: Path | None) -> dict[str, Any]:
    manifest = catalog_manifest(work, "toollinkos", 0)
    qs = queries(n)
    registry = work / "reg-573"
    async with Client(params(manifest, registry, source)) as client:
        await client.list_tools()
        pid = child_with(str(registry))
        await until_ready(client, qs[0])
        for q in qs[:5]:
            await client.call_tool("find_tools", {"query": q})
        cpu, ms = cpu_s(pid), []
        for q in qs:
            t0 = time.perf_counter()
            assert not (await client.call_tool("find_tools", {"query": q})).is_error
            ms.append((time.perf_counter() - t0) * 1000)
        return {
            "queries": n,
            "gateway_cpu_ms_per_query": round((cpu_s(pid) - cpu) * 1000 / n, 2),
            "p50_ms_loaded": round(pct(ms, 0.5), 2),
        }


async def main(args: argparse.Namespace) -> dict[str, Any]:
    report: dict[str, Any] = {"source": str(args.source or "installed")}
    with tempfile.TemporaryDirectory(prefix="toolweave-loop-cost-") as tmp:
        work = Path(tmp)
        for mode in ("auto", "legacy"):
            report[f"call_{mode}"] = await calls(work, args.calls, mode, args.source)
            print(json.dumps({f"call_{mode}": report[f"call_{mode}"]}), flush=True)
        if args.queries > 0 and TOOLLINKOS.exists():
            report["find_tools_573"] = await finds(work, args.queries, args.source)
            print(json.dumps({"find_tools_573": report["find_tools_573"]}), flush=True)
        elif args.queries > 0:
            print(f"skipped find_tools: {TOOLLINKOS} is absent", file=sys.stderr)
    return report


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--calls", type=int, default=600, help="timed proxied calls per protocol era")
    parser.add_argument("--queries", type=int, default=300, help="timed find_tools calls (0: none)")
    parser.add_argument("--source", type=Path, help="run the gateway from this toolweave checkout")
    parser.add_argument("--json", action="store_true", help="print the whole report as one JSON document")
    ns = parser.parse_args()
    result = anyio.run(main, ns)
    if ns.json:
        print(json.dumps(result, indent=2))
