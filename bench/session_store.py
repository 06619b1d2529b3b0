"""Session state in Redis: find_tools latency with in-process sessions vs sessions in Redis.

Real ``toolweave serve --transport http`` processes on 127.0.0.1 over the ToolLinkOS catalog (573 tools),
a real ``redis-server`` (Debian's) on a free port, 2026-era MCP clients that name their session in
``_meta["io.toolweave/session"]`` (so their sessions are the shareable kind). Three configurations, the
same seeded query sequence in each:

* ``in_process``: one gateway, no session store (the default);
* ``redis_1_replica``: one gateway with ``session_store_url``: every turn writes through to Redis (one
  pipelined round trip), lookups are served from the in-process copy;
* ``redis_2_replicas_alternating``: two gateways on the same registry and Redis, each session sending its
  requests alternately to A and B: the worst case, every request meets a copy the other replica made
  stale (one GET) before its write-through.

``--sessions`` sessions run concurrently, ``--turns`` find_tools calls each, the configurations
interleaved ``--repeat`` times. Prints JSON: p50/p95 and gateway CPU-ms per request for each round of each
configuration, the store's own write/read round trip, errors, machine. Latency figures depend on the
machine's load: say so when recording them.

Usage: .venv/bin/python bench/session_store.py [--sessions 8] [--turns 40]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio
from mcp import Client

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))  # the loopback helpers of tests/net.py
from gateway_bench import TOOLLINKOS, TOOLWEAVE, catalog_manifest, machine, pct
from load_bench import all_queries, cpu_seconds

from tests.meta import session_meta
from tests.net import free_port, wait_port


def start_gateway(manifest: Path, registry: Path, log: Path, store_url: str | None) -> tuple[Any, str]:
    port = free_port()
    env = dict(os.environ, TOOLWEAVE_LOG_LEVEL="WARNING")
    if store_url:
        env["TOOLWEAVE_SESSION_STORE_URL"] = store_url
    cmd = [TOOLWEAVE, "serve", "-m", str(manifest), "--registry", str(registry), "--transport", "http"]
    with log.open("ab") as err:
        proc = subprocess.Popen([*cmd, "--port", str(port)], stdout=subprocess.DEVNULL, stderr=err, env=env)
    wait_port(port, proc, timeout=120)
    return proc, f"http://127.0.0.1:{port}/mcp"


async def wait_ready(url: str) -> None:
    """A find_tools waits for the registry (the first start embeds the catalog): retry until it answers."""
    deadline = time.monotonic() + 900
    while True:
        try:
            async with Client(url) as client:
                result = await client.call_tool("find_tools", {"query": "warm up"})
                if not result.is_error:
                    return
        except Exception:
            if time.monotonic() > deadline:
                raise
        await anyio.sleep(1)


async def run_load(urls: list[str], sessions: int, turns: int, seed: int, tag: str) -> dict[str, Any]:
    pool = all_queries()
    rng = random.Random(seed)
    plans = [[rng.choice(pool) for _ in range(turns)] for _ in range(sessions)]
    ms: list[float] = []
    errors = 0

    async def session(index: int) -> None:
        nonlocal errors
        meta = session_meta(f"{tag}-{index}")
        async with AsyncExitStack() as stack:  # entered and left in this task, as the SDK requires
            clients = [await stack.enter_async_context(Client(url)) for url in urls]
            for turn, query in enumerate(plans[index]):
                client = clients[turn % len(clients)]
                t0 = time.perf_counter()
                try:
                    result = await client.call_tool("find_tools", {"query": query}, meta=meta)
                    if result.is_error:
                        errors += 1
                except Exception:
                    errors += 1
                ms.append((time.perf_counter() - t0) * 1000)

    started = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for index in range(sessions):
            tg.start_soon(session, index)
    return {
        "requests": len(ms),
        "errors": errors,
        "seconds": round(time.perf_counter() - started, 1),
        "p50_ms": round(pct(ms, 0.50), 1),
        "p95_ms": round(pct(ms, 0.95), 1),
    }


async def store_round_trips(url: str, n: int = 300) -> dict[str, Any]:
    """The store's own cost, without a gateway: one write-through (SET + PUBLISH, pipelined) and one
    read of a 40-tool session, as a replica pays them."""
    from toolweave.server.sessions.session_book import Session
    from toolweave.server.sessions.shared import RedisSessions
    from toolweave.server.turns.publishing import PublishedSet

    shared = RedisSessions(url, 60)
    session = Session("client-bench", PublishedSet(40))
    session.published.select([f"source__tool_{i}" for i in range(40)], session.next_turn())
    for text in all_queries()[:5]:
        session.add_turn(text)
    writes, reads = [], []
    for _ in range(n):
        t0 = time.perf_counter()
        await shared.save("bench", session.state())
        t1 = time.perf_counter()
        await shared.load("bench")
        writes.append((t1 - t0) * 1000)
        reads.append((time.perf_counter() - t1) * 1000)
    await shared.aclose()
    return {"write_p50_ms": round(pct(writes, 0.5), 2), "read_p50_ms": round(pct(reads, 0.5), 2)}


async def main(args: argparse.Namespace) -> dict[str, Any]:
    redis_bin = shutil.which("redis-server")
    if redis_bin is None:
        sys.exit("needs redis-server (Debian: apt-get install -y redis-server)")
    results: dict[str, Any] = {"machine": machine(), "sessions": args.sessions, "turns": args.turns}
    with tempfile.TemporaryDirectory(prefix="toolweave-sessions-") as tmp:
        work = Path(tmp)
        manifest = catalog_manifest(work, "toollinkos", 0)
        registry = work / "registry"
        redis_port = free_port()
        redis = subprocess.Popen(
            [redis_bin, "--port", str(redis_port), "--bind", "127.0.0.1", "--dir", tmp, "--save", ""],
            stdout=subprocess.DEVNULL,
        )
        store_url = f"redis://127.0.0.1:{redis_port}/0"
        configs = [
            ("in_process", None, 1),
            ("redis_1_replica", store_url, 1),
            ("redis_2_replicas_alternating", store_url, 2),
        ]
        try:
            wait_port(redis_port, redis, timeout=20)
            results["store_round_trips"] = await store_round_trips(store_url)
            # interleaved repeats: on a loaded machine the load drifts between configurations
            for rep, (name, url, replicas) in ((r, c) for r in range(args.repeat) for c in configs):
                gateways = [
                    start_gateway(manifest, registry, work / f"{name}-{i}.log", url) for i in range(replicas)
                ]
                try:
                    for _proc, gateway_url in gateways:
                        await wait_ready(gateway_url)
                    urls = [u for _p, u in gateways]
                    cpu0 = sum(cpu_seconds(proc.pid) for proc, _u in gateways)
                    figures = await run_load(urls, args.sessions, args.turns, args.seed, f"{name}-{rep}")
                    cpu = sum(cpu_seconds(proc.pid) for proc, _u in gateways) - cpu0
                    figures["gateway_cpu_ms_per_request"] = round(cpu * 1000 / max(1, figures["requests"]), 1)
                    results.setdefault(name, []).append(figures)
                finally:
                    for proc, _url in gateways:
                        proc.terminate()
                        proc.wait(30)
        finally:
            redis.terminate()
            redis.wait(10)
    return results


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sessions", type=int, default=8, help="concurrent client sessions")
    parser.add_argument("--turns", type=int, default=40, help="find_tools calls per session")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--repeat", type=int, default=2, help="rounds over the three configurations")
    if not TOOLLINKOS.is_dir():
        sys.exit(f"needs {TOOLLINKOS}")
    print(json.dumps(anyio.run(main, parser.parse_args()), indent=2))
