"""mcp-use and smolagents against a real gateway, each client's defaults, from a scratch venv.

Both pin ``mcp<2``, so they cannot share toolweave's venv. This runner builds (once) a scratch venv with
``pip install mcp-use "smolagents[mcp]"`` (``--venv``), builds a registry (time upstream), then runs this
same file inside that venv (``--driver``) per client × transport: list the tools, ``find_tools`` "what time
is it in Tokyo", ``call_tool`` ``time__get_current_time`` Asia/Tokyo. It reports whether the find named the
time tool, whether the call returned Tokyo's time, the wall time, the ERROR lines the client printed, and
the versions pip resolved.

    .venv/bin/python bench/more_clients.py [--venv /tmp/tw-more-venv] [--json]

Only the standard library is imported at the top: the driver half runs in the scratch venv.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from per_call_clients import build_registry, ensure_venv, time_manifest
from ports import free_port, wait_port

TOKYO = "what time is it in Tokyo"
TOOL = "time__get_current_time"
PACKAGES = ["mcp-use", "smolagents[mcp]"]
CALL = {"name": TOOL, "arguments": {"timezone": "Asia/Tokyo"}}


async def drive_mcp_use(target: dict[str, Any]) -> dict[str, Any]:
    from mcp_use import MCPClient

    client = MCPClient.from_dict({"mcpServers": {"tw": target}})
    session = await client.create_session("tw")
    assert session is not None
    try:
        listed = [t.name for t in await session.list_tools()]
        found = await session.call_tool("find_tools", {"query": TOKYO})
        called = await session.call_tool("call_tool", CALL)
    finally:
        await client.close_all_sessions()
    return {"listed": listed, "found": found.model_dump_json(), "called": called.model_dump_json()}


def drive_smolagents(target: dict[str, Any]) -> dict[str, Any]:
    from mcp import StdioServerParameters
    from smolagents import MCPClient

    params: Any = (
        StdioServerParameters(command=target["command"], args=target["args"], env=target["env"])
        if "command" in target
        else {"url": target["url"], "transport": "streamable-http"}
    )
    with MCPClient(params) as tools:
        by = {t.name: t for t in tools}
        found = by["find_tools"](query=TOKYO)
        called = by["call_tool"](**CALL)
    return {"listed": sorted(by), "found": str(found), "called": str(called)}


def driver_main(client: str, spec: str) -> None:
    from importlib.metadata import version

    target = json.loads(spec)
    t0 = time.perf_counter()
    out = asyncio.run(drive_mcp_use(target)) if client == "mcp-use" else drive_smolagents(target)
    out["wall_s"] = round(time.perf_counter() - t0, 2)
    out["versions"] = {p: version(p) for p in ("mcp", "mcp-use", "smolagents", "websockets")}
    print(json.dumps(out))


# --- the runner half: runs in toolweave's venv ------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--venv", type=Path, default=Path(tempfile.gettempdir()) / "tw-more-venv")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--driver", nargs=2, metavar=("CLIENT", "SPEC"), help=argparse.SUPPRESS)
    ns = parser.parse_args()
    if ns.driver:
        driver_main(*ns.driver)
        return
    python = ensure_venv(ns.venv, PACKAGES)
    toolweave = str(Path(sys.executable).with_name("toolweave"))
    report: dict[str, Any] = {"load_1min": round(os.getloadavg()[0], 2), "runs": []}
    with tempfile.TemporaryDirectory(prefix="toolweave-more-clients-") as tmp:
        manifest = time_manifest(Path(tmp))
        env = {**os.environ, "TOOLWEAVE_LOG_LEVEL": "WARNING"}
        serve = [toolweave, "serve", "--manifest", str(manifest), "--registry", str(Path(tmp) / "registry")]
        build_registry(serve, env)
        for transport in ("stdio", "http"):
            gateway = None
            if transport == "http":
                port = free_port()
                gateway = subprocess.Popen(
                    [*serve, "--transport", "http", "--port", str(port)],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    env=env,
                )
                wait_port(port, gateway)
                target: dict[str, Any] = {"url": f"http://127.0.0.1:{port}/mcp"}
            else:
                target = {"command": serve[0], "args": serve[1:], "env": env}
            try:
                for client in ("mcp-use", "smolagents"):
                    done = subprocess.run(
                        [str(python), __file__, "--driver", client, json.dumps(target)],
                        capture_output=True,
                        timeout=300,
                        check=False,
                    )
                    errors = [
                        line for line in done.stderr.decode(errors="replace").splitlines() if "ERROR" in line
                    ]
                    row: dict[str, Any] = {"client": client, "transport": transport, "exit": done.returncode}
                    row["client_error_lines"] = [e[:200] for e in errors[:3]]
                    if done.returncode == 0:
                        out = json.loads(done.stdout.decode().strip().splitlines()[-1])
                        row["found_time_tool"] = TOOL in out["found"]
                        row["called_tokyo"] = "+09:00" in out["called"]
                        row["wall_s"], row["versions"] = out["wall_s"], out["versions"]
                    else:
                        row["stderr_tail"] = done.stderr.decode(errors="replace")[-600:]
                    report["runs"].append(row)
            finally:
                if gateway is not None:
                    gateway.send_signal(signal.SIGTERM)
                    gateway.wait(30)
    print(json.dumps(report, indent=None if ns.json else 2))


if __name__ == "__main__":
    main()
