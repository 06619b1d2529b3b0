"""Gateway benchmark: proxy overhead, find_tools latency, time to the first tools/list.

Everything goes through real processes over stdio, as a desktop client would use the gateway:

1. Proxy overhead: 200 calls of mcp-server-time's ``get_current_time`` directly and through
   ``toolweave serve``, interleaved one by one in the same run (so machine load hits both alike);
   reported as the ratio of the medians (goal <= 1.10) and the added milliseconds, and as the CPU time
   the gateway process spent per proxied call (user + system, every thread, from procfs): the part
   of the cost that a loaded machine does not blur.
2. ``find_tools`` p50/p95 through the gateway with the ToolLinkOS catalog (573 tools) as a
   ``catalogs:`` entry, and with 10,000 tools (ToolLinkOS + distinct synthesised tools). Queries are
   ToolLinkOS user queries in file order; also the gateway's CPU time per query.
3. Time from spawning ``toolweave serve`` to the answer of the first ``tools/list``, with a registry
   of 1,000 tools already ingested (median of 3 starts).

Usage: .venv/bin/python bench/gateway_bench.py [--calls 200] [--queries 200] [--skip-10k] [--json]
Needs ../shared/datasets/toollinkos beside the repository (parts 2 and 3 are skipped without it).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters

from toolweave.server.fronts.shutdown import child_pids

REPO = Path(__file__).resolve().parents[1]
TOOLLINKOS = REPO.parent / "shared" / "datasets" / "toollinkos"
TOOLWEAVE = str(Path(sys.executable).parent / "toolweave")
TIME_ARGS = ["-m", "mcp_server_time", "--local-timezone", "UTC"]


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def gateway_params(manifest: Path, registry: Path) -> StdioServerParameters:
    env = dict(os.environ, TOOLWEAVE_LOG_LEVEL="WARNING")
    return StdioServerParameters(
        command=TOOLWEAVE, args=["serve", "--manifest", str(manifest), "--registry", str(registry)], env=env
    )


def child_with(marker: str) -> int | None:
    """The pid of this process's child whose command line holds ``marker`` (a gateway's registry path)."""
    for pid in child_pids():
        try:
            if marker in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace"):
                return pid
        except OSError:
            continue
    return None


def cpu_s(pid: int | None) -> float:
    """CPU time (user + system, every thread) ``pid`` has used so far; NaN where procfs cannot tell.

    Wall-clock latency on a shared machine measures the neighbours as much as the gateway; the CPU
    the gateway process spends per operation is what the gateway itself costs."""
    if pid is None:
        return float("nan")
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return float("nan")
    fields = text[text.rindex(")") + 2 :].split()  # after "(comm)", which may hold spaces
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# -- 1. proxy overhead ---------------------------------------------------------------------------------
async def proxy_overhead(work: Path, calls: int, mode: str) -> dict[str, Any]:
    """``mode`` is the protocol era of every hop: client -> time server, client -> gateway -> time server."""
    manifest = work / f"time-{mode}.yaml"
    manifest.write_text(
        f"servers:\n  time:\n    command: {sys.executable}\n    args: {json.dumps(TIME_ARGS)}\n"
        f"    protocol: {mode}\n"
    )
    direct_params = StdioServerParameters(command=sys.executable, args=TIME_ARGS, env=dict(os.environ))
    args = {"timezone": "Europe/Paris"}
    direct_ms: list[float] = []
    gateway_ms: list[float] = []
    registry = work / f"registry-time-{mode}"
    async with (
        Client(direct_params, mode=mode) as direct,
        Client(gateway_params(manifest, registry), mode=mode) as gateway,
    ):
        gateway_pid = child_with(str(registry))
        # Publish the tool and let both clients list it: an SDK client that calls a tool it has not
        # listed re-lists on every call (to find its output schema), which would swamp the figures.
        await publish(gateway, "current time in a timezone", "time__get_current_time")
        await direct.list_tools()
        for _ in range(20):  # warm-up: imports, connections, the gateway's first-connection grace
            assert not (await direct.call_tool("get_current_time", args)).is_error
            result = await gateway.call_tool("time__get_current_time", args)
            assert not result.is_error, result
        cpu_before = cpu_s(gateway_pid)
        for _ in range(calls):
            t0 = time.perf_counter()
            await direct.call_tool("get_current_time", args)
            t1 = time.perf_counter()
            await gateway.call_tool("time__get_current_time", args)
            t2 = time.perf_counter()
            direct_ms.append((t1 - t0) * 1000)
            gateway_ms.append((t2 - t1) * 1000)
        # the gateway idles through the direct calls: all it spent here went to the proxied ones
        gateway_cpu_ms = (cpu_s(gateway_pid) - cpu_before) * 1000 / calls
        era = gateway.protocol_version
    d, g = statistics.median(direct_ms), statistics.median(gateway_ms)
    return {
        "calls": calls,
        "protocol": era,
        "direct_median_ms": round(d, 3),
        "gateway_median_ms": round(g, 3),
        "direct_p95_ms": round(pct(direct_ms, 0.95), 3),
        "gateway_p95_ms": round(pct(gateway_ms, 0.95), 3),
        "ratio": round(g / d, 3),
        "added_ms": round(g - d, 3),
        "gateway_cpu_ms_per_call": round(gateway_cpu_ms, 3),
    }


async def publish(client: Client, query: str, name: str, wait_s: float = 120.0) -> None:
    """``find_tools`` until the gateway publishes ``name`` (a gateway answers at once while it starts)."""
    with anyio.fail_after(wait_s):
        while True:
            await client.call_tool("find_tools", {"query": query})
            if name in [t.name for t in (await client.list_tools(cache_mode="bypass")).tools]:
                return
            await anyio.sleep(0.5)


# -- catalogs ------------------------------------------------------------------------------------------
DOMAINS = [
    "billing", "calendar", "crm", "inventory", "payroll", "shipping", "ticketing", "analytics", "storage",
    "messaging", "hr", "marketing", "sales", "support", "security", "devops", "finance", "legal", "travel",
    "health", "education", "realestate", "insurance", "logistics", "procurement", "warehouse", "fleet",
    "energy", "telecom", "media", "gaming", "music", "video", "photos", "maps", "weather", "news", "sports",
    "recipes", "fitness", "banking", "crypto", "tax", "events", "forums", "wiki", "survey", "forms",
    "contracts", "assets",
]  # fmt: skip
ACTIONS = [
    ("create", "Create a new"), ("get", "Fetch one"), ("list", "List every"),
    ("update", "Update an existing"),
    ("delete", "Delete a"), ("archive", "Archive an old"), ("export", "Export to CSV each"),
    ("import", "Import from a file a batch of"), ("search", "Search by keyword for a"),
    ("count", "Count the"), ("approve", "Approve a pending"), ("reject", "Reject a pending"),
    ("assign", "Assign an owner to a"), ("tag", "Attach labels to a"), ("share", "Share with a colleague a"),
    ("lock", "Lock against edits a"), ("restore", "Restore a deleted"), ("merge", "Merge two duplicate"),
    ("validate", "Check the fields of a"), ("summarize", "Write a short summary of a"),
]  # fmt: skip
OBJECTS = [
    "record",
    "report",
    "invoice",
    "order",
    "account",
    "document",
    "schedule",
    "request",
    "note",
    "batch",
]


def synthetic_tools(n: int) -> list[dict[str, Any]]:
    """``n`` distinct tools in the normalized ``tools.jsonl`` shape (domain x action x object)."""
    out: list[dict[str, Any]] = []
    for domain in DOMAINS:
        for verb, phrase in ACTIONS:
            for obj in OBJECTS:
                if len(out) == n:
                    return out
                out.append({
                    "name": f"{domain}_{verb}_{obj}",
                    "description": f"{phrase} {obj} in the {domain} system.",
                    "parameters": {
                        "type": "object",
                        "properties": {
                            f"{obj}_id": {"type": "string", "description": f"Id of the {domain} {obj}."},
                            "note": {"type": "string"},
                        },
                        "required": [f"{obj}_id"] if verb != "create" else [],
                    },
                    "depends_on": [],
                })  # fmt: skip
    if len(out) < n:
        raise ValueError(f"can synthesise at most {len(out)} tools")
    return out


def catalog_manifest(work: Path, name: str, synthetic: int) -> Path:
    lines = ["catalogs:", f"  - {{path: {TOOLLINKOS}, source: toollinkos}}"]
    if synthetic:
        folder = work / f"synthetic-{synthetic}"
        folder.mkdir(exist_ok=True)
        with (folder / "tools.jsonl").open("w") as f:
            for tool in synthetic_tools(synthetic):
                f.write(json.dumps(tool) + "\n")
        lines.append(f"  - {{path: {folder}, source: synth}}")
    manifest = work / f"{name}.yaml"
    manifest.write_text("\n".join(lines) + "\n")
    return manifest


def queries(n: int) -> list[str]:
    data = json.loads((TOOLLINKOS / "instances.json").read_text())
    return [row["user_query"] for row in data[:n]]


async def until_ready(client: Client, query: str) -> None:
    """Wait until the gateway answers ``find_tools`` with tools: until then (opening its registry,
    ingesting its catalogs) it answers at once with none and a note to call again."""
    with anyio.fail_after(1800):
        while not (await client.call_tool("find_tools", {"query": query})).structured_content["tools"]:
            await anyio.sleep(0.5)


# -- 2. find_tools latency --------------------------------------------------------------------------------
async def find_tools_latency(manifest: Path, registry: Path, qs: list[str]) -> dict[str, Any]:
    started = time.perf_counter()
    ms: list[float] = []
    async with Client(gateway_params(manifest, registry)) as client:
        listed = await client.list_tools()  # answered at once: the gateway starts in the background
        await until_ready(client, qs[0])  # the first start ingests the catalogs (embedding everything)
        ingest_s = time.perf_counter() - started
        gateway_pid = child_with(str(registry))
        for q in qs[:5]:
            await client.call_tool("find_tools", {"query": q})
        cpu_before = cpu_s(gateway_pid)
        for q in qs:
            t0 = time.perf_counter()
            result = await client.call_tool("find_tools", {"query": q})
            ms.append((time.perf_counter() - t0) * 1000)
            assert not result.is_error, result
            assert result.structured_content and result.structured_content["tools"], q
        gateway_cpu_ms = (cpu_s(gateway_pid) - cpu_before) * 1000 / len(qs)
    return {
        "queries": len(qs),
        "p50_ms": round(pct(ms, 0.50), 2),
        "p95_ms": round(pct(ms, 0.95), 2),
        "max_ms": round(max(ms), 2),
        "gateway_cpu_ms_per_query": round(gateway_cpu_ms, 2),
        "first_start_incl_ingest_s": round(ingest_s, 1),
        "published_at_start": len(listed.tools),
    }


# -- 3. time to first tools/list --------------------------------------------------------------------------
async def first_list_s(manifest: Path, registry: Path) -> float:
    t0 = time.perf_counter()
    async with Client(gateway_params(manifest, registry)) as client:
        await client.list_tools()
        return time.perf_counter() - t0


def registry_size(registry: Path) -> int:
    from toolweave.registry import Registry

    reg = Registry.open(registry)
    try:
        return len(reg)
    finally:
        reg.close()


def machine() -> dict[str, Any]:
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    cpu = next(
        (line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
         if line.startswith("model name")),
        platform.processor(),
    ) if Path("/proc/cpuinfo").exists() else platform.processor()  # fmt: skip
    return {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "commit": commit.stdout.strip(),
        "cores": os.cpu_count(),
        "cpu": cpu,
        "python": platform.python_version(),
        "load_1min": load,
    }


async def main(args: argparse.Namespace) -> dict[str, Any]:
    report: dict[str, Any] = {"machine": machine()}
    with tempfile.TemporaryDirectory(prefix="toolweave-gateway-bench-") as tmp:
        work = Path(tmp)
        for mode in ("auto", "legacy"):
            key = f"proxy_overhead_{mode}"
            report[key] = await proxy_overhead(work, args.calls, mode)
            print(json.dumps({key: report[key]}), flush=True)
        if not TOOLLINKOS.exists():
            print(f"skipped find_tools and startup: {TOOLLINKOS} is absent", file=sys.stderr)
            return report
        qs = queries(args.queries)
        m573 = catalog_manifest(work, "toollinkos", 0)
        report["find_tools_573"] = await find_tools_latency(m573, work / "reg-573", qs)
        report["find_tools_573"]["tools"] = registry_size(work / "reg-573")
        print(json.dumps({"find_tools_573": report["find_tools_573"]}), flush=True)

        m1k = catalog_manifest(work, "thousand", 1000 - 573)
        async with Client(gateway_params(m1k, work / "reg-1k")) as client:  # ingest once
            await until_ready(client, qs[0])
        starts = [await first_list_s(m1k, work / "reg-1k") for _ in range(3)]
        report["first_tools_list"] = {
            "tools": registry_size(work / "reg-1k"),
            "runs_s": [round(s, 2) for s in starts],
            "median_s": round(statistics.median(starts), 2),
        }
        print(json.dumps({"first_tools_list": report["first_tools_list"]}), flush=True)

        if not args.skip_10k:
            m10k = catalog_manifest(work, "tenk", 10_000 - 573)
            report["find_tools_10k"] = await find_tools_latency(m10k, work / "reg-10k", qs)
            report["find_tools_10k"]["tools"] = registry_size(work / "reg-10k")
            print(json.dumps({"find_tools_10k": report["find_tools_10k"]}), flush=True)
    return report


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--calls", type=int, default=200, help="timed proxied calls (and as many direct ones)"
    )
    parser.add_argument("--queries", type=int, default=200, help="timed find_tools calls per registry size")
    parser.add_argument(
        "--skip-10k", action="store_true", help="skip the 10,000-tool run (ingest takes minutes)"
    )
    parser.add_argument(
        "--json", action="store_true", help="print the whole report as one JSON document at the end"
    )
    ns = parser.parse_args()
    result = anyio.run(main, ns)
    if ns.json:
        print(json.dumps(result, indent=2))
