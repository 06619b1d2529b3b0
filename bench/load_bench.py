"""Load benchmark: find_tools throughput and latency under many concurrent sessions.

A real ``toolweave serve --transport http`` process on 127.0.0.1 with the ToolLinkOS catalog (573 tools);
``--sessions`` MCP clients (handshake era, so each has its own ``Mcp-Session-Id`` session) each call
``find_tools`` in a loop with ToolLinkOS user queries until ``--requests`` calls were made in all or
``--seconds`` passed. Queries are drawn at random (seeded) from a pool of ``--pool`` distinct queries;
``--pool 0`` means every request gets a query never asked before (no cache hits possible).

Two load clients (``--client``): ``sdk`` runs ``--sessions`` full MCP SDK clients (one ``Client`` each,
with its standalone GET stream); ``raw`` (the default) is one asyncio process speaking the same protocol
as plain JSON-RPC over HTTP with httpx: ``initialize`` (handshake era: the answer names the session in
``Mcp-Session-Id``), ``notifications/initialized``, then ``tools/call find_tools`` on that session, each
answer read whole (SSE event or JSON) and checked. Both run on the same cores as the gateway; 50 SDK
clients spend ~10-12 CPU-ms per request (the raw client ~5), which the gateway then lacks, so ``raw``
measures the gateway more closely and ``sdk`` the whole machine. ``raw`` opens no GET stream, so it
cannot hear list_changed and never re-lists: the gateway does not hold its answers for a re-list
(before branch ``p99`` it held each session's first changed answer ``publish.relist_wait_ms``).

Reports requests/s, p50/p95/p99 latency, errors, and the gateway process's CPU time per find_tools
(user + system, from /proc): on a shared machine the wall-clock figures say little, while CPU-ms per
request bounds the throughput of an idle machine (2 cores / CPU-ms). The load average is recorded.
``--timeline FILE`` writes every request's start, latency and rank in its session (1 = the session's
first ``find_tools``), to see where the slow ones fall (cold start, stalls).
``--registry DIR`` keeps the registry between runs (the first start embeds the catalog).

Usage: .venv/bin/python bench/load_bench.py [--client raw|sdk] [--sessions 50] [--requests 3000]
       [--seconds 120] [--pool 300] [--rounds 1] [--registry DIR] [--timeline FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gateway_bench import TOOLLINKOS, TOOLWEAVE, catalog_manifest, machine, pct


def all_queries() -> list[str]:
    data = json.loads((TOOLLINKOS / "instances.json").read_text())
    return list(dict.fromkeys(row["user_query"] for row in data))


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def wait_ready(url: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            async with (
                httpx2.AsyncClient(timeout=600) as http,
                Client(streamable_http_client(url, http_client=http), mode="legacy") as client,
            ):
                result = await client.call_tool("find_tools", {"query": "warm up"})
                if not result.is_error:  # "unavailable" while the registry still opens or embeds
                    return
        except Exception:
            if time.monotonic() > deadline:
                raise
        if time.monotonic() > deadline:
            raise TimeoutError(f"{url} did not answer find_tools within {timeout:.0f} s")
        await anyio.sleep(1)


def rss_mb(pid: int) -> float:
    """Resident memory of process ``pid`` (Linux), in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    return 0.0


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process ``pid`` and its threads (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


PROTOCOL_VERSION = "2025-11-25"  # handshake era: one Mcp-Session-Id per client


class RawSession:
    """One MCP session as plain JSON-RPC over HTTP (see the module docstring)."""

    def __init__(self, http: httpx.AsyncClient, url: str) -> None:
        self._http = http
        self._url = url
        self._headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
        self._next_id = 0

    async def start(self) -> None:
        params = {
            "protocolVersion": PROTOCOL_VERSION,
            "capabilities": {},
            "clientInfo": {"name": "toolweave-load-bench", "version": "1"},
        }
        response = await self._post("initialize", params)
        self._headers["Mcp-Session-Id"] = response.headers["mcp-session-id"]
        self._headers["Mcp-Protocol-Version"] = PROTOCOL_VERSION
        _result(response, "initialize")
        notice = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        sent = await self._http.post(self._url, json=notice, headers=self._headers)
        sent.raise_for_status()

    async def find_tools(self, query: str) -> dict[str, Any]:
        params = {"name": "find_tools", "arguments": {"query": query}}
        return _result(await self._post("tools/call", params), "tools/call")

    async def _post(self, method: str, params: dict[str, Any]) -> httpx.Response:
        self._next_id += 1
        body = {"jsonrpc": "2.0", "id": self._next_id, "method": method, "params": params}
        response = await self._http.post(self._url, json=body, headers=self._headers)
        response.raise_for_status()
        return response


def _result(response: httpx.Response, method: str) -> dict[str, Any]:
    """The JSON-RPC result of ``response`` (a JSON body or an SSE stream whose last message answers)."""
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        messages = [json.loads(line[5:]) for line in response.text.splitlines() if line.startswith("data:")]
    else:
        messages = [response.json()]
    answer = next((m for m in reversed(messages) if "id" in m), None)
    if answer is None or "result" not in answer:
        raise RuntimeError(f"{method}: no result in {response.text[:200]!r}")
    result: dict[str, Any] = answer["result"]
    return result


async def run_load(url: str, args: argparse.Namespace) -> dict[str, Any]:
    pool = all_queries()
    rng = random.Random(7)
    if args.pool:
        pool = rng.sample(pool, min(args.pool, len(pool)))
    fresh = iter(rng.sample(pool, len(pool))) if not args.pool else None
    latencies: list[float] = []
    timeline: list[tuple[float, float, int]] = []  # (start s, latency s, session's nth request) per request
    errors = 0
    issued = 0
    # One TLS context for every session's HTTP client: each client would build its own (~16 ms of the
    # load client's event loop, ~0.8 s for 50 sessions, interleaved with the first sessions' requests,
    # whose answers then waited to be read: it showed as gateway latency). Plain http: never used.
    tls = httpx.create_ssl_context()
    started = time.perf_counter()
    client_cpu = time.process_time()
    deadline = started + args.seconds

    def next_query() -> str | None:
        nonlocal issued
        if issued >= args.requests or time.perf_counter() > deadline:
            return None
        issued += 1
        if fresh is not None:
            return next(fresh, None)
        return rng.choice(pool)

    async def raw_session() -> None:
        nonlocal errors
        async with httpx.AsyncClient(timeout=120, verify=tls) as http:
            client = RawSession(http, url)
            await client.start()
            nth = 0
            while (query := next_query()) is not None:
                nth += 1
                t0 = time.perf_counter()
                try:
                    result = await client.find_tools(query)
                    if result.get("isError") or not (result.get("structuredContent") or {}).get("tools"):
                        errors += 1
                except Exception:
                    errors += 1
                latencies.append(time.perf_counter() - t0)
                timeline.append((t0 - started, latencies[-1], nth))

    async def sdk_session() -> None:
        nonlocal errors
        async with (
            httpx2.AsyncClient(timeout=120, verify=tls) as http,
            Client(streamable_http_client(url, http_client=http), mode="legacy") as client,
        ):
            nth = 0
            while (query := next_query()) is not None:
                nth += 1
                t0 = time.perf_counter()
                try:
                    result = await client.call_tool("find_tools", {"query": query})
                    if result.is_error or not (result.structured_content or {}).get("tools"):
                        errors += 1
                except Exception:
                    errors += 1
                latencies.append(time.perf_counter() - t0)
                timeline.append((t0 - started, latencies[-1], nth))

    async with anyio.create_task_group() as tg:
        for _ in range(args.sessions):
            tg.start_soon(raw_session if args.client == "raw" else sdk_session)
    elapsed = time.perf_counter() - started
    client_cpu = time.process_time() - client_cpu
    ms = [x * 1000 for x in latencies]
    if args.timeline:
        args.timeline.write_text(json.dumps(timeline))
    return {
        "client": args.client,
        "sessions": args.sessions,
        "requests": len(latencies),
        "errors": errors,
        "distinct_queries": args.pool or len(latencies),
        "seconds": round(elapsed, 1),
        "requests_per_s": round(len(latencies) / elapsed, 1),
        "p50_ms": round(pct(ms, 0.50), 1),
        "p95_ms": round(pct(ms, 0.95), 1),
        "p99_ms": round(pct(ms, 0.99), 1),
        "client_cpu_ms_per_request": round(client_cpu * 1000 / max(1, len(latencies)), 1),
    }


async def main(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="toolweave-load-") as tmp:
        work = Path(tmp)
        registry = args.registry or work / "registry"
        manifest = catalog_manifest(work, "toollinkos", 0)
        port = free_port()
        log = (work / "gateway.log").open("wb")
        env = dict(os.environ, TOOLWEAVE_LOG_LEVEL="WARNING")
        if args.no_cache:
            env["TOOLWEAVE_FIND_CACHE_SIZE"] = "0"
        cmd = [TOOLWEAVE, "serve", "-m", str(manifest), "--registry", str(registry)]
        proc = subprocess.Popen([*cmd, "--transport", "http", "--port", str(port)], stderr=log, env=env)
        url = f"http://127.0.0.1:{port}/mcp"
        try:
            await wait_ready(url, timeout=900)  # the first start embeds the catalog
            rss = [rss_mb(proc.pid)]
            for _ in range(args.rounds):  # new sessions each round: does memory level off?
                cpu0 = cpu_seconds(proc.pid)
                result = await run_load(url, args)
                cpu = cpu_seconds(proc.pid) - cpu0
                result["gateway_cpu_ms_per_request"] = round(cpu * 1000 / max(1, result["requests"]), 1)
                rss.append(rss_mb(proc.pid))
            result["gateway_rss_mb_start_then_after_each_round"] = rss
        finally:
            proc.terminate()
            proc.wait(30)
            log.close()
    # base-vs-branch runs import another tree's toolweave through PYTHONPATH: say which one ran
    code = os.environ.get("PYTHONPATH") or "this worktree"
    return {"machine": machine(), "gateway_code": code, "cache": not args.no_cache, **result}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--client", choices=["raw", "sdk"], default="raw", help="load client (see above)")
    parser.add_argument("--sessions", type=int, default=50)
    parser.add_argument("--requests", type=int, default=3000, help="find_tools calls in all (upper bound)")
    parser.add_argument("--seconds", type=float, default=120, help="stop issuing after this long")
    parser.add_argument("--pool", type=int, default=300, help="distinct queries to draw from; 0 = all fresh")
    parser.add_argument("--no-cache", action="store_true", help="disable the find_tools cache")
    parser.add_argument("--rounds", type=int, default=1, help="load rounds on one gateway (RSS after each)")
    parser.add_argument("--registry", type=Path, help="registry directory kept between runs")
    parser.add_argument(
        "--timeline", type=Path, help="write each request's (start s, latency s, nth of its session) as JSON"
    )
    if not TOOLLINKOS.is_dir():
        sys.exit(f"needs {TOOLLINKOS}")
    print(json.dumps(anyio.run(main, parser.parse_args()), indent=2))
