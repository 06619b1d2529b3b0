"""What a proxied call costs on a shared registry, and what its usage examples cost the other replicas.

    .venv/bin/python bench/replica_calls.py [--calls 1000] [--flush-s 5] [--poll-s 2]

For a local directory and for an `s3://` registry (moto's S3 server on 127.0.0.1, a real `redis-server`
as the writer lock): a gateway (in process, the real MCP SDK client over memory streams) with an
upstream that answers at once, so the figure is the gateway's and the registry's own cost; ``--calls``
`call_tool` calls, each after a `find_tools` with a new request (so every call records a new usage
example; only the calls are timed). The usage buffer is flushed every ``--flush-s`` (the default
setting is 60 s: 5 s makes a thousand calls cause several flushes). A second handle on the same
registry (another replica) polls it every ``--poll-s`` like a gateway does and counts how it loaded
each new generation: whole (a full reload) or as the commit's changes. Prints a markdown table.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp import Client

from toolweave.records import ToolRecord
from toolweave.registry import Embedder, Registry
from toolweave.settings import Settings

TOOLS = [
    ToolRecord(
        id=f"echo__echo_{n}",
        source="echo",
        name=f"echo_{n}",
        description=f"Echo variant {n}: sends the text back unchanged (for request kind {n}).",
        input_schema={"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
    )
    for n in range(20)
]


class EchoBackend:
    """An upstream that answers at once (the bench measures the gateway, not an upstream)."""

    name = "echo"
    available = True
    last_error = None
    call_timeout_s = None

    async def run(self, on_tools: Any) -> None:
        await on_tools(self.name, TOOLS, [])
        await anyio.sleep_forever()

    async def call(self, tool: ToolRecord, arguments: dict[str, Any], **_: Any) -> types.CallToolResult:
        return types.CallToolResult(content=[types.TextContent(text=str(arguments.get("text")))])


@contextmanager
def s3_registry(work: Path) -> Iterator[tuple[str, dict[str, str]]]:
    from replicas import moto  # bench/replicas.py: moto's S3 server with a bucket `bench`

    binary = shutil.which("redis-server")
    if binary is None:
        raise SystemExit("needs redis-server (apt-get install redis-server) for the s3 registry's lock")
    redis_port = _free_port()
    redis = subprocess.Popen(
        [
            binary,
            "--port",
            str(redis_port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(work),
        ],
        stdout=subprocess.DEVNULL,
    )
    os.environ["TOOLWEAVE_REGISTRY_LOCK_URL"] = f"redis://127.0.0.1:{redis_port}/0"
    time.sleep(0.5)
    try:
        with moto() as options:
            yield "s3://bench/calls", options
    finally:
        redis.kill()
        redis.wait()


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def pct(values: list[float], q: float) -> float:
    return sorted(values)[min(len(values) - 1, int(q * len(values)))]


async def measure(
    location: Path | str, options: dict[str, str], args: argparse.Namespace, embedder: Embedder
) -> dict[str, Any]:
    from toolweave.server.gateway import Gateway

    settings = Settings(home=location, registry_storage_options=options, usage_flush_s=args.flush_s)
    registry = Registry.open(location, embedder=embedder, settings=settings)
    registry.ingest("echo", TOOLS)
    follower = Registry.open(location, embedder=embedder, settings=settings)
    full, delta = follower._state.full_loads, follower._state.delta_loads
    stop = threading.Event()
    polls: list[float] = []

    def poll() -> None:
        while not stop.wait(args.poll_s):
            t0 = time.perf_counter()
            follower.refresh()
            polls.append(time.perf_counter() - t0)

    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    gateway = Gateway(registry, [EchoBackend()], settings)
    seconds: list[float] = []
    generation = registry.loaded_generation
    async with Client(gateway.server, mode="legacy") as client:
        for n in range(args.calls):
            await client.call_tool("find_tools", {"query": f"echo back request number {n} of kind {n % 20}"})
            t0 = time.perf_counter()
            result = await client.call_tool(
                "call_tool", {"name": f"echo__echo_{n % 20}", "arguments": {"text": str(n)}}
            )
            seconds.append(time.perf_counter() - t0)
            assert not result.is_error, result
    registry.close()  # writes what is buffered
    stop.set()
    poller.join()
    follower.refresh()
    commits = registry.loaded_generation - generation
    return {
        "calls": len(seconds),
        "p50_ms": statistics.median(seconds) * 1000,
        "p95_ms": pct(seconds, 0.95) * 1000,
        "commits": commits,
        "follower_full": follower._state.full_loads - full,
        "follower_delta": follower._state.delta_loads - delta,
        "poll_p50_ms": statistics.median(polls) * 1000 if polls else 0.0,
        "examples": sum(1 for e in follower._usage.by_tool.values() for x in e if x.origin == "call"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--flush-s", type=float, default=5.0)
    parser.add_argument("--poll-s", type=float, default=2.0)
    args = parser.parse_args()
    embedder = Embedder()
    rows = []
    with tempfile.TemporaryDirectory(prefix="toolweave-calls-") as tmp:
        work = Path(tmp)
        rows.append(("local dir", anyio.run(measure, work / "reg", {}, args, embedder)))
        with s3_registry(work) as (uri, options):
            rows.append(("s3 (moto) + Redis lock", anyio.run(measure, uri, options, args, embedder)))
    print(f"load average: {os.getloadavg()}")
    print(
        print(
            "| registry | calls | call_tool p50 / p95 (ms) | commits | follower: full reloads / change loads "
            "| poll p50 (ms) | examples followed |"
        )
    )
    print("|---|---|---|---|---|---|---|")
    for name, r in rows:
        print(
            f"| {name} | {r['calls']} | {r['p50_ms']:.1f} / {r['p95_ms']:.1f} | {r['commits']} | "
            f"{r['follower_full']} / {r['follower_delta']} | {r['poll_p50_ms']:.1f} | {r['examples']} |"
        )


if __name__ == "__main__":
    main()
