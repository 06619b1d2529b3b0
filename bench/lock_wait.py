"""A long CLI ingest beside two replicas that flush: how long the flushes wait for the writer lock.

    .venv/bin/python bench/lock_wait.py [--tools 10000] [--replicas 2] [--poll-s 2]
    .venv/bin/python bench/lock_wait.py --redis   # the Redis lease: paused Redis, holder killed with -9

One local registry (the writer lock is the OS file lock; a Redis lock is taken the same way). Two
replica processes record a usage example and flush it, over and over, each flush timed; meanwhile this
process ingests ``--tools`` synthetic tools, as ``toolweave ingest-catalog`` does, and records how long
it held the writer lock. The ingest embeds and infers before it takes the lock and writes in chunks, so
the flushes should wait for one chunk's write and commit at most. Prints one markdown row: the flushes'
whole time (their own write and catching up with the ingest's commits included) and their wait for the
lock alone.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from toolweave.records import ToolRecord
from toolweave.registry import Embedder, Registry
from toolweave.settings import Settings

REPLICA = """
import json, sys, time
from pathlib import Path
from toolweave.registry import Registry
path, stop, out, poll_s = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]), float(sys.argv[4])
registry = Registry.open(path)
if poll_s:  # as a gateway does (registry_poll_s): it loads what the flushes leave unloaded
    import threading
    def poll():
        while not stop.exists():
            time.sleep(poll_s)
            registry.refresh()
    threading.Thread(target=poll, daemon=True).start()
waits, lock_waits, n = [], [], 0
phases = []  # per flush: seconds in each step, to see where a slow flush's time goes
current = {}
def timed(owner, name, key):
    real = getattr(owner, name)
    def wrapper(*args, **kwargs):
        started = time.monotonic()
        try:
            return real(*args, **kwargs)
        finally:
            current[key] = current.get(key, 0.0) + time.monotonic() - started
    setattr(owner, name, wrapper)
lock = registry._state.db.lock
timed(lock, "acquire", "lock")
timed(registry._follower, "catch_up", "catch_up")
timed(registry._commits, "_compact_now_and_then", "compact")
timed(registry._state.db, "commit", "commit")
appliers = registry._follower.appliers
for kind in list(appliers):
    real_apply = appliers[kind]
    def applied(keys, real_apply=real_apply, kind=kind):
        started = time.monotonic()
        try:
            return real_apply(keys)
        finally:
            current["load " + kind] = current.get("load " + kind, 0.0) + time.monotonic() - started
    appliers[kind] = applied
timed(registry._follower, "load_committed", "load everything")
import toolweave.registry.follower as follower_module
real_since = follower_module.since
def since(*args):
    delta = real_since(*args)
    current["delta"] = "everything" if delta is None else " ".join(
        f"{k}:{'all' if v is None else len(v)}" for k, v in sorted(delta.items())
    )
    return delta
follower_module.since = since
for sink in registry._flusher._sinks:
    timed(sink, "prepare", "prepare")
    timed(sink, "write", "write")
while not stop.exists():
    n += 1
    registry.record_usage("replica__get_weather", f"weather forecast wanted, request {chr(97 + n % 26) * 3}")
    current.clear()
    started = time.monotonic()
    registry.flush_observations()
    waits.append(time.monotonic() - started)
    lock_waits.append(current.get("lock", 0.0))
    steps = ("prepare", "lock", "catch_up", "compact", "write", "commit")
    other = waits[-1] - sum(current.get(k, 0.0) for k in steps)  # mostly: waiting for this process's poll
    phases.append(dict(current, total=waits[-1], other=other))
    time.sleep(2.0)  # 30 times the default usage_flush_s (60 s)
out.write_text(json.dumps({"flushes": waits, "lock_waits": lock_waits, "phases": phases}))
registry.close()
"""


def tools(source: str, count: int) -> list[ToolRecord]:
    return [
        ToolRecord(
            id=f"{source}__op{n}",
            source=source,
            name=f"op{n}",
            description=f"Operation {n} of the {source} service: reads and updates records of kind {n % 97}.",
        )
        for n in range(count)
    ]


def redis_lease() -> None:
    """Seconds until the next writer holds the lock: after a lock request sent to a paused Redis (then
    resumed), and after the holder was killed with -9 (a real redis-server, default lease)."""
    import shutil

    from tests.redis_server import RedisServer
    from toolweave.registry.lock import RedisLock

    binary = shutil.which("redis-server")
    if binary is None:
        raise SystemExit("redis-server is not installed")
    with tempfile.TemporaryDirectory() as tmp:
        server = RedisServer(binary, Path(tmp))
        server.start()
        try:
            ttl = Settings().registry_lock_ttl_s
            first = RedisLock(server.url, "s3://bench/reg", ttl)
            first._client.ping()
            server.pause()
            first.try_acquire()  # times out
            server.resume()
            started = time.monotonic()
            RedisLock(server.url, "s3://bench/reg", ttl).acquire(120)
            paused = time.monotonic() - started
            code = (
                "import sys, time; from toolweave.registry.lock import RedisLock; "
                "lock = RedisLock(sys.argv[1], 's3://bench/other', float(sys.argv[2])); "
                "assert lock.try_acquire(); print('held', flush=True); time.sleep(600)"
            )
            holder = subprocess.Popen(
                [sys.executable, "-c", code, server.url, str(ttl)], stdout=subprocess.PIPE
            )
            assert holder.stdout is not None and holder.stdout.readline().strip() == b"held"
            holder.kill()
            holder.wait()
            started = time.monotonic()
            RedisLock(server.url, "s3://bench/other", ttl).acquire(120)
            killed = time.monotonic() - started
        finally:
            server.kill()
    print("| lease s | next writer after a paused Redis resumed, s | after kill -9 of the holder, s |")
    print("|---:|---:|---:|")
    print(f"| {ttl:g} | {paused:.2f} | {killed:.2f} |")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tools", type=int, default=10_000)
    parser.add_argument("--replicas", type=int, default=2)
    parser.add_argument("--redis", action="store_true", help="measure the Redis lease instead")
    parser.add_argument(
        "--poll-s", type=float, default=0.0, help="the replicas also poll the registry, as gateways do (2 s)"
    )
    args = parser.parse_args()
    if args.redis:
        redis_lease()
        return
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "reg"
        embedder = Embedder(Settings().embedding_model)
        registry = Registry.open(path, embedder=embedder)
        weather = ToolRecord(
            id="replica__get_weather", source="replica", name="get_weather", description="Weather."
        )
        registry.ingest("replica", [weather])
        lock = registry._state.db.lock
        held: list[float] = []
        real_acquire, real_release = lock.try_acquire, lock.release
        taken = [0.0]

        def try_acquire() -> bool:
            got = real_acquire()
            if got and not taken[0]:
                taken[0] = time.monotonic()
            return got

        def release() -> None:
            if taken[0]:
                held.append(time.monotonic() - taken[0])
                taken[0] = 0.0
            real_release()

        lock.try_acquire, lock.release = try_acquire, release  # type: ignore[method-assign]
        stop = Path(tmp) / "stop"
        outs = [Path(tmp) / f"replica{n}.json" for n in range(args.replicas)]
        argv = [sys.executable, "-c", REPLICA, str(path), str(stop)]
        procs = [subprocess.Popen([*argv, str(out), str(args.poll_s)]) for out in outs]
        time.sleep(20)  # the replicas open the registry and flush a few times
        started = time.monotonic()
        summary = registry.ingest("bulk", tools("bulk", args.tools))
        seconds = time.monotonic() - started
        time.sleep(3)
        stop.touch()
        for proc in procs:
            proc.wait(120)
        results = [json.loads(out.read_text()) for out in outs]
        waits = [w for r in results for w in r["flushes"]]
        lock_waits = [w for r in results for w in r["lock_waits"]]
        phases = sorted((p for r in results for p in r["phases"]), key=lambda p: -p["total"])
        registry.close()
    print(
        "| tools | ingest s | lock holds (ingest) | longest hold s | replica flushes | flush p50 s | "
        "flush max s | flush lock wait max s |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    print(
        f"| {summary.embedded} | {seconds:.1f} | {len(held)} | {max(held):.1f} | {len(waits)} | "
        f"{statistics.median(waits):.2f} | {max(waits):.2f} | {max(lock_waits):.2f} |"
    )
    print("\nslowest flushes, seconds per step (lock: waiting for it; catch_up: loading others' commits):")
    for p in phases[:5]:
        delta = p.pop("delta", "")
        steps = ", ".join(f"{k} {v:.2f}" for k, v in sorted(p.items(), key=lambda kv: -kv[1]))
        print(f"  {steps}" + (f" (loaded: {delta})" if delta else ""))


if __name__ == "__main__":
    main()
