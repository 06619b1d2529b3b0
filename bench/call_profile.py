"""Where the gateway's work per proxied call goes, in a measure a loaded machine does not blur.

``loop_cost.py`` gives CPU seconds per call, which a shared machine still inflates (caches, context
switches: the same code measured 0.97 and 2.5 ms per call at loads 3 and 10). This runner profiles the
``toolweave serve`` process's event-loop thread over ``--calls`` proxied calls of mcp-server-time's
``get_current_time`` (warm, published, as ``loop_cost.py`` makes them) with cProfile, either with a
**counting clock** (``--clock count``, the default: each profiler event, a call or a return of a Python
or C function, counts 1, so the figures are the same on a quiet and a busy machine, give or take the
event loop's extra turns) or with the thread's CPU clock (``--clock cpu``: slower, and as noisy as the
machine). It prints the events (or CPU µs) per call, in total, learned after the reply was written
(``server/calls/after_reply.py``) and before it, and under the busiest functions.

The profiler is switched on by SIGUSR1 once the calls are warm and dumped by SIGUSR2, so start-up is
not in it. ``--source DIR`` profiles another checkout (e.g. ``git archive BASE | tar -x -C DIR``): the
gateway runs with ``DIR`` as its working directory, so its ``toolweave`` is imported from there.

Usage: .venv/bin/python bench/call_profile.py [--mode auto|legacy] [--calls 1000] [--clock count|cpu]
       [--source DIR] [--top 40] [--save calls.prof]
"""

from __future__ import annotations

import argparse
import json
import os
import pstats
import signal
import sys
import tempfile
import time
from pathlib import Path

import anyio
from gateway_bench import TIME_ARGS, child_with, cpu_s, publish
from mcp import Client, StdioServerParameters

PROFILED = """
import cProfile, itertools, os, signal, sys, time
clock = (itertools.count().__next__, 1e-6) if os.environ["PROFILE_CLOCK"] == "count" else (time.thread_time,)
profile = cProfile.Profile(*clock)
signal.signal(signal.SIGUSR1, lambda *_: profile.enable())
def dump(*_):
    profile.disable()
    profile.dump_stats(os.environ["PROFILE_OUT"])
signal.signal(signal.SIGUSR2, dump)
sys.path.insert(0, os.getcwd())
from toolweave.__main__ import main
sys.argv = ["toolweave", *sys.argv[1:]]
main()
"""


async def profile_calls(args: argparse.Namespace, work: Path, out: Path) -> dict[str, float]:
    manifest = work / "time.yaml"
    manifest.write_text(
        f"servers:\n  time:\n    command: {sys.executable}\n    args: {json.dumps(TIME_ARGS)}\n"
        f"    protocol: {args.mode}\n"
    )
    registry = work / "registry"
    env = dict(os.environ, TOOLWEAVE_LOG_LEVEL="WARNING", PROFILE_OUT=str(out), PROFILE_CLOCK=args.clock)
    serve = ["serve", "--manifest", str(manifest), "--registry", str(registry)]
    cwd = str(args.source.resolve()) if args.source else None
    gateway = StdioServerParameters(command=sys.executable, args=["-c", PROFILED, *serve], env=env, cwd=cwd)
    arguments = {"timezone": "Europe/Paris"}
    async with Client(gateway, mode=args.mode) as client:
        pid = child_with(str(registry))
        assert pid is not None
        await publish(client, "current time in a timezone", "time__get_current_time")
        for _ in range(50):  # warm-up
            await client.call_tool("time__get_current_time", arguments)
        os.kill(pid, signal.SIGUSR1)
        await anyio.sleep(0.5)
        cpu, started = cpu_s(pid), time.perf_counter()
        for _ in range(args.calls):
            assert not (await client.call_tool("time__get_current_time", arguments)).is_error
        cpu, wall = cpu_s(pid) - cpu, time.perf_counter() - started
        os.kill(pid, signal.SIGUSR2)
        for _ in range(100):
            await anyio.sleep(0.1)
            if out.exists() and out.stat().st_size:
                break
        return {
            "cpu_ms_per_call_profiled": cpu * 1000 / args.calls,
            "wall_ms_per_call": wall * 1000 / args.calls,
        }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--mode", choices=["auto", "legacy"], default="auto", help="protocol era of every hop"
    )
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--clock", choices=["count", "cpu"], default="count")
    parser.add_argument("--source", type=Path, help="profile the toolweave of this checkout")
    parser.add_argument("--save", type=Path, help="also keep the profile here (for pstats' callers/callees)")
    parser.add_argument(
        "--top", type=int, default=40, help="functions listed, by what they and their callees took"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="toolweave-call-profile-") as tmp:
        out = Path(tmp) / "calls.prof"
        measured = anyio.run(profile_calls, args, Path(tmp), out)
        stats = pstats.Stats(str(out))
        if args.save:
            stats.dump_stats(str(args.save))
    unit = "events" if args.clock == "count" else "CPU µs"
    per_call = stats.total_tt * 1e6 / args.calls  # type: ignore[attr-defined]
    print(
        f"{args.mode}: {per_call:.0f} {unit} per proxied call (profiled main thread); "
        f"load {os.getloadavg()[0]:.1f}; process CPU {measured['cpu_ms_per_call_profiled']:.2f} ms per call "
        "with the profiler on"
    )
    rows = sorted(stats.stats.items(), key=lambda kv: -kv[1][3])  # type: ignore[attr-defined]
    # what a success teaches is learned once its reply is written (server/calls/after_reply.py): the rest
    # is the work between the request's line and the answer's
    after = sum(
        cumulative
        for (path, _, name), (_, _, _, cumulative, _) in rows
        if path.endswith("server/calls/after_reply.py") and name == "run"
    )
    if after:
        print(
            f"  of which after the reply was written: {after * 1e6 / args.calls:.0f} {unit} per call; "
            f"before it: {per_call - after * 1e6 / args.calls:.0f}"
        )
    print(f"{'cumulative':>10} {'own':>6} {'calls':>6}  function ({unit} per proxied call)")
    for (path, line, name), (_, calls, own, cumulative, _) in rows[: args.top]:
        where = path.split("site-packages/")[-1].split("/toolweave/", 1)[-1]
        shares = (
            f"{cumulative * 1e6 / args.calls:10.0f} {own * 1e6 / args.calls:6.0f} {calls / args.calls:6.1f}"
        )
        print(f"{shares}  {where}:{line}({name})")


if __name__ == "__main__":
    main()
