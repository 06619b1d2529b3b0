"""Replicas on one registry: follower pick-up delay, cost of the idle poll, ingest
throughput with one writer vs two writer processes. Local directory and moto's S3 server.

    .venv/bin/python bench/replicas.py [--tools 200] [--polls 50]

Synthetic tools (no dataset needed); the real embedder. Prints a markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from toolweave.records import ToolRecord
from toolweave.registry import Embedder, Registry
from toolweave.settings import Settings


def tools(source: str, count: int, round_: int = 0) -> list[ToolRecord]:
    return [
        ToolRecord(
            id=f"{source}__op{n}",
            source=source,
            name=f"op{n}",
            description=f"Operation {n} of the {source} service (revision {round_}): reads, updates records.",
        )
        for n in range(count)
    ]


@contextmanager
def moto() -> Iterator[dict[str, str]]:
    import boto3
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "bench")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "bench")
    boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1").create_bucket(Bucket="bench")
    try:
        yield {"aws_endpoint": endpoint, "aws_region": "us-east-1", "allow_http": "true"}
    finally:
        server.stop()


def pct(values: list[float], q: float) -> float:
    return sorted(values)[min(len(values) - 1, int(q * len(values)))]


def idle_poll_ms(follower: Registry, polls: int) -> tuple[float, float]:
    times = []
    for _ in range(polls):
        started = time.perf_counter()
        assert not follower.refresh()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times), pct(times, 0.95)


def pickup_s(writer: Registry, follower: Registry, poll_s: float, rounds: int, count: int) -> list[float]:
    """Writer commits; a follower thread polling every ``poll_s`` reloads. Seconds from the end of the
    writer's commit to the follower's snapshot showing it."""
    delays = []

    def follow(seen: threading.Event) -> None:
        while not follower.refresh():
            time.sleep(poll_s)
        seen.set()

    for round_ in range(1, rounds + 1):
        seen = threading.Event()
        thread = threading.Thread(target=follow, args=(seen,))
        thread.start()
        writer.ingest("bench", tools("bench", count, round_))
        committed = time.perf_counter()
        seen.wait(60)
        delays.append(time.perf_counter() - committed)
        thread.join()
    return delays


def throughput(location: str, options: dict[str, str], writers: int, count: int) -> float:
    """Tools/s for 4 sources of ``count`` tools each, ingested by ``writers`` processes."""
    sources = [f"src{n}" for n in range(4)]
    share = [sources[i::writers] for i in range(writers)]
    here = Path(__file__).resolve().parent
    script = (
        f"import sys, json; sys.path.insert(0, {str(here)!r})\n"
        "from replicas import tools\n"
        "from toolweave.registry import Registry\nfrom toolweave.settings import Settings\n"
        "s = Settings(home=sys.argv[1], registry_storage_options=json.loads(sys.argv[2]))\n"
        "r = Registry.open(settings=s)\n"
        "print('ready', flush=True); sys.stdin.readline()\n"
        f"for src in sys.argv[3:]: r.ingest(src, tools(src, {count}))\n"
    )
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", script, location, json.dumps(options), *mine],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for mine in share
    ]
    for p in procs:  # every writer has its model loaded before the clock starts
        assert p.stdout is not None and p.stdout.readline().strip() == "ready"
    started = time.perf_counter()
    for p in procs:
        assert p.stdin is not None
        p.stdin.write("go\n")
        p.stdin.flush()
    for p in procs:
        p.wait(900)
        assert p.returncode == 0
    return 4 * count / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tools", type=int, default=200, help="tools in the followed registry")
    parser.add_argument("--polls", type=int, default=50)
    parser.add_argument("--ingest-tools", type=int, default=50, help="tools per source (4 sources)")
    args = parser.parse_args()
    embedder = Embedder()
    rows = []
    with moto() as s3, tempfile.TemporaryDirectory() as tmp:
        for label, location, options in (
            ("local dir", f"{tmp}/reg", {}),
            ("s3 (moto)", "s3://bench/reg", s3),
        ):
            settings = Settings(home=location, registry_storage_options=options)
            writer = Registry.open(settings=settings, embedder=embedder)
            writer.ingest("bench", tools("bench", args.tools))
            follower = Registry.open(settings=settings, embedder=embedder)
            p50, p95 = idle_poll_ms(follower, args.polls)
            delays = pickup_s(writer, follower, settings.registry_poll_s, 5, args.tools)
            one = throughput(location.replace("/reg", "/one"), options, 1, args.ingest_tools)
            two = throughput(location.replace("/reg", "/two"), options, 2, args.ingest_tools)
            rows.append(
                f"| {label} | {p50:.1f} / {p95:.1f} | {statistics.median(delays):.2f} / {max(delays):.2f} "
                f"| {one:.0f} | {two:.0f} |"
            )
    poll = Settings().registry_poll_s
    print(f"registry of {args.tools} tools; poll every {poll} s; ingest 4 x {args.ingest_tools} tools")
    print(
        "| registry | idle poll p50 / p95 (ms) | pick-up delay median / max (s) "
        "| ingest 1 writer (tools/s) | 2 writers (tools/s) |"
    )
    print("|---|---|---|---|---|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
