"""fast-agent after ``find_tools``: when does its tool list show what the gateway published?

fast-agent (``fast-agent-mcp`` 0.10, Python >= 3.12, its own venv: ``--venv``) runs one agent with the
scripted ``passthrough`` model on ``toolweave serve`` (``--manifest``/``--registry``: a registry served
before, so the early front answers the first ``find_tools`` from its ready table). The agent lists its
tools, calls ``find_tools``, then lists again after 0.5, 1.5, 3.5, 8.5 and 18.5 s; each list is printed
with its time (from the agent's start). The gateway's stderr goes to ``WORK/gateway.log``.

``--transport stdio`` (default): fast-agent spawns the gateway; its stdio is logged line by line to
``WORK/wire.log`` (which side wrote it, when). ``--transport http``: a fresh gateway is started here
(``--transport http`` on a free port) at the moment fast-agent starts, and fast-agent connects to its
URL, so its first requests meet the HTTP front while the gateway still loads.

Usage: .venv/bin/python bench/fast_agent_relist.py --venv /tmp/fa-venv --manifest M --registry R
       [--transport stdio|http] [--work DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

AGENT = """
import asyncio, json, os, socket, subprocess, sys, time
from fast_agent import FastAgent

# over HTTP: the gateway starts now, fast-agent connects as soon as its port listens (the front answers)
GATEWAY = json.loads(os.environ.get("TW_HTTP_GATEWAY", "null"))
if GATEWAY is not None:
    started = time.monotonic()
    log = open("gateway.log", "ab")
    gateway = subprocess.Popen(GATEWAY["command"], stdout=subprocess.DEVNULL, stderr=log)
    while True:
        try:
            socket.create_connection(("127.0.0.1", GATEWAY["port"]), timeout=1).close()
            break
        except OSError:
            time.sleep(0.01)
    print(f"gateway listening {time.monotonic() - started:.2f} s after its spawn", flush=True)

fast = FastAgent("toolweave-relist", parse_cli_args=False, quiet=True)

@fast.agent(name="a", servers=["toolweave"], model="passthrough")
async def main() -> None:
    async with fast.run() as app:
        t0 = time.monotonic()
        names = lambda tools: [t.name for t in tools.tools]
        print(f"{time.monotonic() - t0:6.2f} s  list {names(await app.a.list_tools())}", flush=True)
        answer = await app.a.send('***CALL_TOOL find_tools {"query": "what time is it in Tokyo"}')
        stamp = time.strftime("%H:%M:%S", time.gmtime()) + f"{time.time() % 1:.3f}"[1:]
        print(f"{time.monotonic() - t0:6.2f} s  find_tools ({stamp} UTC): {str(answer)[:150]}", flush=True)
        for wait in (0.5, 1, 2, 5, 10):
            await asyncio.sleep(wait)
            print(f"{time.monotonic() - t0:6.2f} s  list {names(await app.a.list_tools())}", flush=True)

try:
    asyncio.run(main())
finally:
    if GATEWAY is not None:
        gateway.terminate()
        gateway.wait(30)
"""

# the gateway's stdio, line by line, with the time and the side that wrote it
TEE = """
import subprocess, sys, threading, time
log, lock = open(sys.argv[1], "w"), threading.Lock()
err = open(sys.argv[2], "a")
proc = subprocess.Popen(sys.argv[3:], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err)
def pump(src, dst, side):
    for line in iter(src.readline, b""):
        with lock:
            log.write(f"{time.time():.3f} {side} {line.decode()}")
            log.flush()
        dst.write(line)
        dst.flush()
    dst.close()
threading.Thread(target=pump, args=(proc.stdout, sys.stdout.buffer, "<"), daemon=True).start()
pump(sys.stdin.buffer, proc.stdin, ">")
proc.wait()
"""


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--venv", type=Path, required=True, help="a venv with fast-agent-mcp installed")
    parser.add_argument("--manifest", type=Path, required=True)
    parser.add_argument("--registry", type=Path, required=True)
    parser.add_argument("--work", type=Path, help="where the config and logs go (default: a temp dir)")
    parser.add_argument("--transport", choices=["stdio", "http"], default="stdio")
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="toolweave-fast-agent-"))
    work.mkdir(parents=True, exist_ok=True)
    (work / "agent.py").write_text(AGENT)
    (work / "tee.py").write_text(TEE)
    toolweave = Path(sys.executable).parent / "toolweave"
    serve = ["--manifest", str(args.manifest.resolve()), "--registry", str(args.registry.resolve())]
    if args.transport == "http":
        sys.exit(over_http(args.venv, work, [str(toolweave), "serve", *serve]))
    command = [
        sys.executable, str(work / "tee.py"), str(work / "wire.log"), str(work / "gateway.log"),
        str(toolweave), "serve",
        "--manifest", str(args.manifest.resolve()), "--registry", str(args.registry.resolve()),
    ]  # fmt: skip
    config = (
        "logger: {progress_display: false, show_chat: false, show_tools: false}\n"
        "mcp:\n  servers:\n    toolweave:\n"
        f"      command: {command[0]}\n      args: {command[1:]!r}\n"
    )
    (work / "fastagent.config.yaml").write_text(config.replace("'", '"'))
    done = subprocess.run([str(args.venv / "bin" / "python"), "agent.py"], cwd=work, timeout=300)
    print(f"logs: {work}", file=sys.stderr)
    sys.exit(done.returncode)


def over_http(venv: Path, work: Path, serve: list[str]) -> int:
    """fast-agent against a gateway the agent's script starts over HTTP just before it connects."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    config = (
        "logger: {progress_display: false, show_chat: false, show_tools: false}\n"
        "mcp:\n  servers:\n    toolweave:\n"
        f"      transport: http\n      url: http://127.0.0.1:{port}/mcp\n"
    )
    (work / "fastagent.config.yaml").write_text(config)
    gateway = {"command": [*serve, "--transport", "http", "--port", str(port)], "port": port}
    env = {**os.environ, "TW_HTTP_GATEWAY": json.dumps(gateway)}
    done = subprocess.run([str(venv / "bin" / "python"), "agent.py"], cwd=work, timeout=300, env=env)
    print(f"logs: {work}", file=sys.stderr)
    return done.returncode


if __name__ == "__main__":
    main()
