"""Agent frameworks that cannot share toolweave's venv, driven through a real gateway from a scratch venv.

LangChain's MCP client (`langchain-mcp-adapters`, used by LangChain and LangGraph agents) pins `mcp<2`
while toolweave needs `mcp>=2.3`, so it is not in the dev extra and not in the test suite. This runner:

1. builds (once) a scratch venv with `langchain-mcp-adapters` and `langchain` (`--venv`, default under /tmp);
2. starts `toolweave serve` from *this* interpreter's venv on the time upstream (stdio: the framework
   spawns it; HTTP: started here on a free loopback port), with a fresh registry in a temp directory;
3. runs this same file inside the scratch venv (`--driver`) as a LangChain agent (`create_agent`) whose
   chat model is scripted (no LLM, no network): find_tools (again while the gateway answers that it is
   still starting), then the published tool if the agent was offered it or `call_tool` if not, then a
   call with a bad timezone (the upstream's isError); every client setting is the framework's default;
4. prints pass/fail per framework mode × transport, the path taken, versions and the wall-clock time.

    .venv/bin/python bench/agent_frameworks.py [--venv /tmp/toolweave-agent-frameworks] [--json]

pydantic-ai and the OpenAI Agents SDK share our venv: tests/e2e/test_agent_frameworks.py covers them.
Only the standard library is imported at the top: the driver half runs in the scratch venv.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from per_call_clients import time_manifest
from ports import free_port, wait_port

TOKYO = "what time is it in Tokyo"
TOOL = "time__get_current_time"
BAD_ZONE = "Mars/Olympus_Mons"
PACKAGES = ["langchain-mcp-adapters>=0.3,<0.4", "langchain>=1.5,<2"]
# get_tools(): the adapters' default, a new MCP session for every tool call; session: one session kept
# open for the whole run (client.session() + load_mcp_tools(session)).
MODES = ["session", "per-call"]
TRANSPORTS = ["stdio", "http"]


# --- the driver half: runs inside the scratch venv --------------------------------------------------


STARTING = "the gateway is still starting"
MAX_FINDS = 40


def next_call(called: list[str], offered: list[str], shown: str | None) -> tuple[str, dict[str, Any]] | None:
    """The scripted model's plan (the same as tests/e2e/test_agent_frameworks.py): ``called`` so far,
    the tools ``offered`` now, what it was ``shown`` after its last call. A find_tools answered while
    the gateway starts says to call again: it does."""
    last = called[-1] if called else None
    after_search = len(called) - called.count("find_tools")
    if last is None or (last == "find_tools" and STARTING in (shown or "")):
        return ("find_tools", {"query": TOKYO}) if len(called) < MAX_FINDS else None
    if last == "find_tools" and TOOL in offered:
        return TOOL, {"timezone": "Asia/Tokyo"}
    if last == "find_tools":
        return "call_tool", {"name": TOOL, "arguments": {"timezone": "Asia/Tokyo"}}
    if after_search == 1:
        return "call_tool", {"name": TOOL, "arguments": {"timezone": BAD_ZONE}}
    return None


async def drive_langchain(mode: str, connection: dict[str, Any]) -> dict[str, Any]:
    from langchain.agents import create_agent
    from langchain_core.language_models.chat_models import BaseChatModel
    from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
    from langchain_core.outputs import ChatGeneration, ChatResult
    from langchain_mcp_adapters.client import MultiServerMCPClient
    from langchain_mcp_adapters.tools import load_mcp_tools

    record: dict[str, Any] = {"offered": [], "called": [], "seen": []}
    bound: list[str] = []

    class ScriptedChatModel(BaseChatModel):
        """LangChain's fake chat models emit no tool calls; this one follows next_call()."""

        @property
        def _llm_type(self) -> str:
            return "scripted"

        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            bound[:] = [getattr(t, "name", None) or t["name"] for t in tools]
            return self

        def _generate(
            self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
        ) -> ChatResult:
            step = sum(isinstance(m, AIMessage) for m in messages)
            shown = None
            if step:
                shown = str([m for m in messages if isinstance(m, ToolMessage)][-1].content)
                record["seen"].append(shown)
            record["offered"].append(list(bound))
            call = next_call(record["called"], bound, shown)
            if call is None:
                message = AIMessage(content="done")
            else:
                record["called"].append(call[0])
                message = AIMessage(
                    content="", tool_calls=[{"name": call[0], "args": call[1], "id": f"c{step}"}]
                )
            return ChatResult(generations=[ChatGeneration(message=message)])

    client = MultiServerMCPClient({"toolweave": connection})

    async def run(tools: list[Any]) -> None:
        agent = create_agent(ScriptedChatModel(), tools)
        out = await agent.ainvoke({"messages": [{"role": "user", "content": "what time is it in Tokyo?"}]})
        record["final"] = out["messages"][-1].content

    if mode == "session":
        async with client.session("toolweave") as session:
            await run(await load_mcp_tools(session))
    else:
        await run(await client.get_tools())
    return record


def driver_main(mode: str, connection: str) -> None:
    record = asyncio.run(drive_langchain(mode, json.loads(connection)))
    from importlib.metadata import version

    record["versions"] = {p: version(p) for p in ("langchain-mcp-adapters", "langchain", "langgraph", "mcp")}
    print(json.dumps(record))


# --- the runner half: runs in toolweave's venv ------------------------------------------------------


def ensure_venv(venv: Path) -> Path:
    python = venv / "bin" / "python"
    if not python.exists():
        subprocess.run(["nice", "-n", "10", sys.executable, "-m", "venv", str(venv)], check=True)
    done = subprocess.run(
        ["nice", "-n", "10", str(python), "-m", "pip", "install", "-q", *PACKAGES],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise SystemExit(f"pip install {PACKAGES} into {venv} failed:\n{done.stderr[-2000:]}")
    return python


def check(record: dict[str, Any]) -> tuple[bool, str]:
    """Pass = the task completed with mcp-server-time's real answer, and the bad call came back as an
    error the model could read; the path is reported, not judged (the adapters keep their first list)."""
    called = record.get("called", [])
    starts = max(0, called.count("find_tools") - 1)  # answered "still starting": called again
    seen = record.get("seen", [])[starts:]
    ok = (
        record.get("final") == "done"
        and len(seen) == 3
        and TOOL in seen[0]
        and "Asia/Tokyo" in seen[1]
        and re.search(r"T\d\d:\d\d:\d\d\+09:00", seen[1]) is not None
        and "Invalid timezone" in seen[2]
    )
    path = "direct" if called[starts + 1 : starts + 2] == [TOOL] else "call_tool"
    record["find_tools_calls"] = starts + 1
    return ok, path


def run_one(
    python: Path, mode: str, transport: str, manifest: Path, registry: Path, log: Path
) -> dict[str, Any]:
    toolweave = str(Path(sys.executable).with_name("toolweave"))
    serve = [toolweave, "serve", "--manifest", str(manifest), "--registry", str(registry)]
    gateway: subprocess.Popen[bytes] | None = None
    env = {**os.environ, "TOOLWEAVE_LOG_LEVEL": "INFO"}
    if transport == "stdio":
        connection: dict[str, Any] = {
            "transport": "stdio",
            "command": serve[0],
            "args": serve[1:],
            "env": env,
        }
    else:
        port = free_port()
        with log.open("ab") as err:
            gateway = subprocess.Popen(
                [*serve, "--transport", "http", "--port", str(port)],
                stdout=subprocess.DEVNULL,
                stderr=err,
                env=env,
            )
        wait_port(port, gateway)
        connection = {"transport": "streamable_http", "url": f"http://127.0.0.1:{port}/mcp"}
    started = time.monotonic()
    try:
        with log.open("ab") as err:
            done = subprocess.run(
                [str(python), __file__, "--driver", mode, json.dumps(connection)],
                stdout=subprocess.PIPE,
                stderr=err,
                timeout=600,
            )
        wall = time.monotonic() - started
        if done.returncode != 0:
            return {"ok": False, "error": f"driver exited {done.returncode} (see {log})", "wall_s": wall}
        record: dict[str, Any] = json.loads(done.stdout.decode().strip().splitlines()[-1])
        record["ok"], record["path"] = check(record)
        record["wall_s"] = wall
        return record
    finally:
        if gateway is not None:
            gateway.terminate()
            gateway.wait(15)


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def measured_run(*args: Any) -> dict[str, Any]:
    """run_one plus its CPU time: the driver, the stdio gateway it spawned and the HTTP gateway are all
    reaped when run_one returns. CPU is the load-robust figure beside the wall-clock on a shared machine."""
    before = children_cpu()
    record = run_one(*args)
    record["cpu_s"] = children_cpu() - before
    return record


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--venv", type=Path, default=Path(tempfile.gettempdir()) / "toolweave-agent-frameworks"
    )
    parser.add_argument("--json", action="store_true", help="one JSON line per run instead of the table")
    parser.add_argument("--driver", nargs=2, metavar=("MODE", "CONNECTION"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.driver:
        driver_main(*args.driver)
        return
    python = ensure_venv(args.venv)
    failures = 0
    with tempfile.TemporaryDirectory(prefix="toolweave-agent-frameworks-") as tmp:
        manifest = time_manifest(Path(tmp))
        registry, log = Path(tmp) / "registry", Path(tmp) / "runs.log"
        print(f"loadavg {Path('/proc/loadavg').read_text().split()[0]}", file=sys.stderr)
        for transport in TRANSPORTS:
            for mode in MODES:
                record = measured_run(python, mode, transport, manifest, registry, log)
                failures += not record["ok"]
                row = {"framework": f"langchain ({mode})", "transport": transport, **record}
                if args.json:
                    print(json.dumps(row))
                else:
                    print(
                        f"{row['framework']:<24} {transport:<6} {'PASS' if row['ok'] else 'FAIL'}  "
                        f"path={row.get('path', '?'):<9} offered@step2={row.get('offered', [[], []])[1:2]}  "
                        f"{row['wall_s']:.1f} s wall, {row['cpu_s']:.1f} s CPU  "
                        f"{row.get('versions', row.get('error'))}"
                    )
        if failures:
            print(log.read_text(errors="replace")[-4000:], file=sys.stderr)
    print(f"loadavg {Path('/proc/loadavg').read_text().split()[0]}", file=sys.stderr)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
