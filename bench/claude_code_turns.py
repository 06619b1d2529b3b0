"""Real-client turn loop: Claude Code against the gateway, driven by a scripted model endpoint.

What it answers: does the model's *first* request carry ``find_tools`` and ``call_tool`` (not deferred
behind Claude Code's tool search as a server still "pending")? When the model calls ``find_tools``, does
its *next* request already carry the tool the gateway just published (so it can call it directly), or
must it fall back to ``call_tool``? With the UserPromptSubmit hook installed exactly as docs/clients.md
says, does the *first* request already carry it?

How: a scripted Anthropic Messages endpoint on 127.0.0.1 plays the model. Claude Code (npm
``@anthropic-ai/claude-code``, installed under bench/out/npm on first use) runs ``claude -p "what time is it
in Tokyo"`` with toolweave as its only MCP server (stdio or streamable HTTP) on the demo manifest. The script:
request 1 → ``find_tools``; request 2 → the time tool directly if listed (``direct``), else through
``call_tool`` (``fallback``); then a final answer. Every model request's tool names are recorded.

``--scenario commit-memory``: ``claude -p "show me the last commit of this repository and remember its hash
in memory"``: request 1 → ``find_tools`` (or ``git_log`` at once when listed); then ``git_log`` (directly when
listed, else through ``call_tool``); the request after the git call must carry memory tools (the gateway
publishes the rest of a multi-part request once a call served its first part), and the model then stores
the hash with the memory tool it is given (``create_entities`` when listed, else the first memory tool
listed, called through ``call_tool`` if none is). Outcome ``memory-published`` or ``memory-missing``.

Every step is the one docs/clients.md gives a user: ``claude mcp add`` to register the gateway, the
hook in the user's settings, ``claude -p ... --allowedTools mcp__toolweave``. ``--mcp-list`` instead
runs ``claude mcp list`` (its health check: spawn, handshake, tools/list, each within Claude Code's own
time limits) after each documented ``claude mcp add`` (local scope, project scope with the approval in
the user's settings, a running HTTP gateway), ``--runs`` times, from a cold gateway start each time.

Usage: .venv/bin/python bench/claude_code_turns.py [--runs 10] [--transport stdio|http] [--hook]
           [--no-tool-search] [--busy] [--cold-registry] [--json]
           [--scenario time|commit-memory] [--trace DIR]
       .venv/bin/python bench/claude_code_turns.py --mcp-list [--runs 10]
Needs node/npm (the runner says so and exits 0 without them).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from ports import free_port, wait_port

from tests.busy import cpu_hogs
from tests.claude_code import (
    MAX_RESTARTS,
    PROMPT,
    SERVER,
    STARTING,
    ScriptedModel,
    add_toolweave,
    answer,
    claude_env,
    deferred_now,
    install_claude_code,
    last_tool_result_for,
    last_tool_result_text,
    prefixed,
    serve_in_thread,
    tool_use,
)

REPO = Path(__file__).resolve().parents[1]
NPM_DIR = REPO / "bench" / "out" / "npm"
TOOLWEAVE = str(Path(sys.executable).parent / "toolweave")
HOOK_TIMEOUT_S = 30
"""The hook's timeout docs/clients.md gives Claude Code (seconds; the hook itself returns within 20)."""


COMMIT_PROMPT = "show me the last commit of this repository and remember its hash in memory"
GIT_LOG = "git__git_log"


class CommitMemoryModel(ScriptedModel):
    """Plays the model for the commit-and-remember request (module docstring)."""

    def __init__(self) -> None:
        super().__init__()
        self.memory_tools: list[str] = []
        """The memory tools the request after the git call carried."""

    async def messages(self, request: Request) -> Response:
        body = await request.json()
        self.bodies.append(body)
        tools = [t.get("name", "") for t in body.get("tools") or []]
        if not tools:
            return answer(body, [{"type": "text", "text": "ok"}], "end_turn")
        self.requests.append({"tools": tools, "at": time.monotonic(), "wall": time.time()})
        if prefixed("find_tools") not in tools:
            self.outcome = self.outcome or "not-connected"
            return answer(body, [{"type": "text", "text": "I have no tool for that."}], "end_turn")
        answered = last_tool_result_for(body.get("messages") or [])
        git_args = {"repo_path": str(REPO), "max_count": 1}
        starting = STARTING in last_tool_result_text(body.get("messages") or [])
        if answered == prefixed("find_tools") and starting and self.restarts < MAX_RESTARTS:
            self.restarts += 1  # the gateway was still starting: as a model would, call it again
            return tool_use(body, prefixed("find_tools"), {"query": COMMIT_PROMPT})
        if answered is None or answered == prefixed("find_tools"):
            if answered is None:
                self.first_has_meta_tools = {prefixed("find_tools"), prefixed("call_tool")} <= set(tools)
                self.first_has_tool = prefixed(GIT_LOG) in tools
                if not self.first_has_tool:
                    return tool_use(body, prefixed("find_tools"), {"query": COMMIT_PROMPT})
            if prefixed(GIT_LOG) in tools:
                return tool_use(body, prefixed(GIT_LOG), git_args)
            return tool_use(body, prefixed("call_tool"), {"name": GIT_LOG, "arguments": git_args})
        if answered in (prefixed(GIT_LOG), prefixed("call_tool")) and self.outcome is None:
            memory = [t for t in tools if t.startswith(prefixed("memory__"))]
            deferred = [
                t for t in deferred_now(body.get("messages") or []) if t.startswith(prefixed("memory__"))
            ]
            self.memory_tools = [t.removeprefix(prefixed("")) for t in memory or deferred]
            self.outcome = (
                "memory-published" if memory else "memory-deferred" if deferred else "memory-missing"
            )
            entity = {"entities": [{"name": "last commit", "entityType": "commit", "observations": ["hash"]}]}
            if prefixed("memory__create_entities") in tools:
                return tool_use(body, prefixed("memory__create_entities"), entity)
            if memory:
                return tool_use(body, memory[0], {})
            args = {"name": "memory__create_entities", "arguments": entity}
            return tool_use(body, prefixed("call_tool"), args)
        return answer(body, [{"type": "text", "text": "Done: the hash is in memory."}], "end_turn")


def claude_binary() -> str | None:
    claude, why = install_claude_code(NPM_DIR)
    if claude is None:
        print(f"claude_code_turns: {why}", file=sys.stderr)
    return claude


def install_hook(home: Path) -> None:
    """The UserPromptSubmit hook in the user's settings, exactly as docs/clients.md says."""
    settings = home / ".claude" / "settings.json"
    settings.parent.mkdir(parents=True, exist_ok=True)
    current = json.loads(settings.read_text()) if settings.exists() else {}
    hook = {"type": "command", "command": f"{TOOLWEAVE} hook claude-code", "timeout": HOOK_TIMEOUT_S}
    settings.write_text(json.dumps({**current, "hooks": {"UserPromptSubmit": [{"hooks": [hook]}]}}))


def one_run(
    claude: str,
    work: Path,
    registry: Path,
    transport: str,
    hook: bool,
    scenario: str = "time",
    trace: Path | None = None,
) -> dict[str, Any]:
    model = CommitMemoryModel() if scenario == "commit-memory" else ScriptedModel()
    prompt = COMMIT_PROMPT if scenario == "commit-memory" else PROMPT
    model_port = free_port()
    model_server = serve_in_thread(model.app, model_port)
    gateway: subprocess.Popen[bytes] | None = None
    manifest = REPO / "manifests" / "demo.yaml"
    serve = [TOOLWEAVE, "serve", "--manifest", str(manifest), "--registry", str(registry)]
    try:
        env = claude_env(
            work / "home",
            ANTHROPIC_BASE_URL=f"http://127.0.0.1:{model_port}",
            ANTHROPIC_API_KEY="sk-ant-scripted",
            TOOLWEAVE_LOG_LEVEL="DEBUG" if trace else "WARNING",
            # Claude Code gets a fresh HOME; npx (the demo's memory server) keeps the user's npm cache,
            # or each run would download the package again before the memory tools exist
            NPM_CONFIG_CACHE=os.environ.get("NPM_CONFIG_CACHE", str(Path.home() / ".npm")),
        )
        target: list[str] | str = serve
        if trace is not None and transport == "stdio":  # the pipe's traffic, in the order it carried it
            tap = [sys.executable, str(REPO / "bench" / "wire_tap.py"), str(work / "wire.log")]
            target = [*tap, str(work / "gateway.log"), *serve]
        if transport == "http":
            port = free_port()
            log = (work / "gateway.log").open("ab")
            gateway_env = dict(os.environ, TOOLWEAVE_LOG_LEVEL=env["TOOLWEAVE_LOG_LEVEL"])
            http_serve = [*serve, "--transport", "http", "--port", str(port)]
            gateway = subprocess.Popen(http_serve, stderr=log, env=gateway_env)
            target = f"http://127.0.0.1:{port}/mcp"
            wait_port(port, gateway)
        add_toolweave(claude, work, env, target, "local")
        if hook:
            install_hook(work / "home")
        started = time.monotonic()
        # as docs/clients.md says: -p runs no tool it is not allowed to; mcp__toolweave allows every
        # tool of the server, the ones it finds too
        command = [claude, "-p", prompt, "--allowedTools", f"mcp__{SERVER}"]
        command += ["--model", "claude-sonnet-4-5", "--output-format", "json"]
        proc = subprocess.run(command, env=env, cwd=str(work), capture_output=True, text=True, timeout=180)
        if trace is not None:
            write_trace(trace / f"{work.name}.txt", work, model)
            bodies = json.dumps(model.bodies, indent=1)
            (trace / f"{work.name}-requests.json").write_text(bodies, encoding="utf-8")
        return {
            "outcome": model.outcome or "no-call",
            "memory_tools": getattr(model, "memory_tools", None),
            "sources_listed": [
                sorted(
                    {
                        t.removeprefix(prefixed("")).split("__")[0]
                        for t in r["tools"]
                        if t.startswith(prefixed(""))
                    }
                )
                for r in model.requests
            ],
            "first_request_has_meta_tools": model.first_has_meta_tools,
            "first_request_has_tool": model.first_has_tool,
            "find_tools_again": model.restarts,
            "model_requests": len(model.requests),
            "exit": proc.returncode,
            "seconds": round(time.monotonic() - started, 2),
            # claude started -> its first model request (the hook, when installed, runs before it)
            "first_request_s": round(model.requests[0]["at"] - started, 2) if model.requests else None,
            "stderr_tail": proc.stderr[-300:] if proc.returncode else "",
            # what the gateway did, when a commit-memory run missed (HTTP: its log is ours to read)
            "gateway_said": _turn_lines(work / "gateway.log") if model.outcome == "memory-missing" else [],
        }
    finally:
        model_server.should_exit = True
        if gateway is not None:
            gateway.terminate()
            gateway.wait(timeout=20)


TRACED = ("relist:", "list_changed ->", "did not re-list")
"""The gateway's log lines a trace keeps (at DEBUG, from server/turns/notify.py)."""


def write_trace(path: Path, work: Path, model: ScriptedModel) -> None:
    """One timeline, oldest first: the pipe's traffic (stdio), the gateway's re-list lines and each model
    request with the toolweave tools it carried; times in seconds after the first entry."""
    entries: list[tuple[float, str]] = []
    wire = work / "wire.log"
    for line in wire.read_text(errors="replace").splitlines() if wire.exists() else []:
        stamp, _, rest = line.partition(" ")
        entries.append((float(stamp), f"wire    {rest}"))
    log = work / "gateway.log"
    for line in log.read_text(errors="replace").splitlines() if log.exists() else []:
        if any(k in line for k in TRACED) and " t=" in line:
            at = float(line.split(" t=", 1)[1].split()[0])
            entries.append((at, f"gateway {line.split(': ', 1)[-1][:220]}"))
    for n, request in enumerate(model.requests, 1):
        tools = [t.removeprefix(prefixed("")) for t in request["tools"] if t.startswith(prefixed(""))]
        entries.append((request["wall"], f"MODEL   request {n}: {', '.join(tools)[:220]}"))
    entries.sort(key=lambda entry: entry[0])  # stable: the order within each source stays
    start = entries[0][0] if entries else 0.0
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{at - start:8.3f} {text}\n" for at, text in entries), encoding="utf-8")


def _turn_lines(log: Path) -> list[str]:
    """The gateway's publishing and re-list lines (INFO and up), for a run that missed."""
    if not log.exists():
        return []
    keep = ("next steps", "re-list", ": +[", "is available", "is unavailable")
    return [
        line[-160:] for line in log.read_text(errors="replace").splitlines() if any(k in line for k in keep)
    ]


MCP_LIST_SETUPS = ("local", "project", "http")
"""``claude mcp list`` after each documented ``claude mcp add``: stdio in the local scope, stdio in the
project scope (.mcp.json, approved in the user's settings), and a running HTTP gateway."""


def mcp_list_run(claude: str, work: Path, registry: Path, setup: str) -> dict[str, Any]:
    """One ``claude mcp list`` (Claude Code's health check: spawn or connect, handshake, tools/list,
    each within its own time limits) from a cold gateway, after the documented ``claude mcp add``."""
    manifest = REPO / "manifests" / "demo.yaml"
    serve = [TOOLWEAVE, "serve", "--manifest", str(manifest), "--registry", str(registry)]
    env = claude_env(work / "home")
    gateway: subprocess.Popen[bytes] | None = None
    try:
        target: list[str] | str = serve
        if setup == "http":
            port = free_port()
            gateway = subprocess.Popen(
                [*serve, "--transport", "http", "--port", str(port)], stderr=subprocess.DEVNULL
            )
            wait_port(port, gateway)
            target = f"http://127.0.0.1:{port}/mcp"
        add_toolweave(claude, work, env, target, "project" if setup == "project" else "local")
        started = time.monotonic()
        proc = subprocess.run(
            [claude, "mcp", "list"], env=env, cwd=str(work), capture_output=True, text=True, timeout=120
        )
    finally:
        if gateway is not None:
            gateway.terminate()
            gateway.wait(timeout=20)
    line = next((x for x in proc.stdout.splitlines() if x.startswith(f"{SERVER}:")), "")
    return {
        "setup": setup,
        "healthy": "Connected" in line,
        "line": line[-120:],
        "seconds": round(time.monotonic() - started, 2),
        "exit": proc.returncode,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--transport", choices=["stdio", "http"], default="stdio")
    parser.add_argument("--hook", action="store_true", help="install toolweave's UserPromptSubmit hook")
    parser.add_argument("--scenario", choices=["time", "commit-memory"], default="time")
    parser.add_argument("--mcp-list", action="store_true", help="health-check with `claude mcp list`")
    parser.add_argument(
        "--no-tool-search",
        action="store_true",
        help="ENABLE_TOOL_SEARCH=false (else Claude Code's default)",
    )
    parser.add_argument(
        "--busy", action="store_true", help="keep every core busy with CPU hogs meanwhile (tests/busy.py)"
    )
    parser.add_argument(
        "--cold-registry",
        action="store_true",
        help="count the run that builds the registry (else it runs first and is reported apart)",
    )
    parser.add_argument("--json", action="store_true")
    parser.add_argument(
        "--trace",
        type=Path,
        help="write each run's timeline here: the stdio pipe's traffic, the gateway's re-list lines, the "
        "model requests (stdio runs the gateway behind bench/wire_tap.py)",
    )
    args = parser.parse_args()
    load_before = os.getloadavg()[0]
    if args.no_tool_search:
        os.environ["ENABLE_TOOL_SEARCH"] = "false"
    claude = claude_binary()
    if claude is None:
        print("claude_code_turns: npm is not installed; skipped", file=sys.stderr)
        return 0
    if args.mcp_list:
        return mcp_list_main(claude, args.runs, args.json)
    rows = []
    busy = cpu_hogs() if args.busy else contextlib.nullcontext()
    building: dict[str, Any] | None = None
    with busy, tempfile.TemporaryDirectory(prefix="tw-cc-", ignore_cleanup_errors=True) as tmp:
        registry = Path(tmp) / "registry"  # shared by the runs: only the first one embeds
        # Unless --cold-registry, a first run builds the registry and is reported apart: the measured
        # runs start from a registry a gateway served before, as a user's second session does.
        for n in range(args.runs + (0 if args.cold_registry else 1)):
            work = Path(tmp) / f"run{n}"
            work.mkdir()
            row = one_run(claude, work, registry, args.transport, args.hook, args.scenario, args.trace)
            if n == 0 and not args.cold_registry:
                building = row
            else:
                rows.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
    counts = Counter(r["outcome"] for r in rows)
    summary = {
        "bench": "claude_code_turns",
        "transport": args.transport,
        "hook": args.hook,
        "scenario": args.scenario,
        "tool_search": os.environ.get("ENABLE_TOOL_SEARCH", "default"),
        "runs": len(rows),
        "outcomes": dict(counts),
        "first_request_has_meta_tools": sum(bool(r["first_request_has_meta_tools"]) for r in rows),
        "first_request_has_tool": sum(bool(r["first_request_has_tool"]) for r in rows),
        "find_tools_again": sum(r["find_tools_again"] for r in rows),
        "seconds_p50": sorted(r["seconds"] for r in rows)[len(rows) // 2] if rows else None,
        "first_request_s_p50": _p50([r["first_request_s"] for r in rows]),
        "building_run": building and {k: building[k] for k in ("outcome", "find_tools_again", "seconds")},
        "busy": args.busy,
        "load_before_after": [load_before, os.getloadavg()[0]],
        "machine": f"{platform.machine()} {os.cpu_count()} cores, Python {platform.python_version()}",
        "date": time.strftime("%Y-%m-%d"),
        "commit": subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True
        ).stdout.strip(),
    }
    print(json.dumps(summary) if args.json else "\n".join(f"{k}: {v}" for k, v in summary.items()))
    return 0


def _p50(values: list[float | None]) -> float | None:
    known = sorted(v for v in values if v is not None)
    return known[len(known) // 2] if known else None


def mcp_list_main(claude: str, runs: int, as_json: bool) -> int:
    rows = []
    with tempfile.TemporaryDirectory(prefix="tw-cc-list-", ignore_cleanup_errors=True) as tmp:
        registry = Path(tmp) / "registry"
        for n in range(runs):
            for setup in MCP_LIST_SETUPS:
                work = Path(tmp) / f"run{n}-{setup}"
                work.mkdir()
                rows.append(mcp_list_run(claude, work, registry, setup))
                print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    summary = {
        "bench": "claude_mcp_list",
        "runs": {setup: sum(r["setup"] == setup for r in rows) for setup in MCP_LIST_SETUPS},
        "healthy": {
            setup: sum(r["healthy"] for r in rows if r["setup"] == setup) for setup in MCP_LIST_SETUPS
        },
        "seconds_p50": sorted(r["seconds"] for r in rows)[len(rows) // 2] if rows else None,
        "first_request_s_p50": _p50([r["first_request_s"] for r in rows]),
        "load_after": os.getloadavg()[0],
        "date": time.strftime("%Y-%m-%d"),
    }
    print(json.dumps(summary) if as_json else "\n".join(f"{k}: {v}" for k, v in summary.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
