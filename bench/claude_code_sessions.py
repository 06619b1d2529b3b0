"""Claude Code processes, one after the other, against one HTTP gateway: does each start with the set
published by the one before?

Claude Code 2.1 speaks the 2026-07-28 era over streamable HTTP: no session id, every process sends the
same client name from the same address. Each process runs ``claude -p "what time is it in Tokyo"`` (the
scripted model calls ``find_tools``, which publishes the time tools in that process's session).
``started_with_earlier_set`` counts the processes after the first whose *first* model request already
carried the time tool (they started with an earlier process's set: the bug). Each process's outcome is kept
(``direct``: the request after ``find_tools`` carried the tool it found; ``fallback``: through
``call_tool``; ``first``: the first request already had it), so a fix that separated processes by
splitting one process's own requests would show as ``fallback``.

One gateway for all pairs (as a user's long-running ``toolweave serve --transport http``), a model
endpoint per process, the documented setup (``claude mcp add --transport http``; bench/claude_code_turns.py).

Usage: .venv/bin/python bench/claude_code_sessions.py [--runs 10] [--busy] [--json]
Needs node/npm (exits 0 without them).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import claude_code_turns as cc
from ports import free_port, wait_port

from tests import claude_code
from tests.busy import cpu_hogs


def one_process(claude: str, work: Path, url: str, first: bool) -> dict[str, Any]:
    model = claude_code.ScriptedModel()
    port = free_port()
    server = claude_code.serve_in_thread(model.app, port)
    try:
        env = claude_code.claude_env(
            work / "home", ANTHROPIC_BASE_URL=f"http://127.0.0.1:{port}", ANTHROPIC_API_KEY="sk-ant-scripted"
        )
        if first:
            claude_code.add_toolweave(claude, work, env, url, "local")
        command = [claude, "-p", claude_code.PROMPT, "--allowedTools", f"mcp__{claude_code.SERVER}"]
        command += ["--model", "claude-sonnet-4-5", "--output-format", "json"]
        done = subprocess.run(command, env=env, cwd=str(work), capture_output=True, text=True, timeout=240)
        return {
            "outcome": model.outcome or "no-call",
            "first_has_tool": model.first_has_tool,
            "exit": done.returncode,
        }
    finally:
        server.should_exit = True


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10, help="Claude Code processes, one after the other")
    parser.add_argument("--busy", action="store_true", help="keep every core busy meanwhile (tests/busy.py)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    claude = cc.claude_binary()
    if claude is None:
        print("node/npm not found: skipped")
        return 0
    busy = cpu_hogs() if args.busy else contextlib.nullcontext()
    with busy, tempfile.TemporaryDirectory(prefix="tw-ccs-", ignore_cleanup_errors=True) as tmp:
        work = Path(tmp) / "work"
        work.mkdir()
        gateway_port = free_port()
        manifest = cc.REPO / "manifests" / "demo.yaml"
        serve = [
            cc.TOOLWEAVE,
            "serve",
            "--manifest",
            str(manifest),
            "--registry",
            str(Path(tmp) / "registry"),
        ]
        env = {**os.environ, "TOOLWEAVE_LOG_LEVEL": "INFO"}  # to count the requests placed apart
        with (Path(tmp) / "gateway.log").open("ab") as log:
            gateway = subprocess.Popen(
                [*serve, "--transport", "http", "--port", str(gateway_port)], stderr=log, env=env
            )
        url = f"http://127.0.0.1:{gateway_port}/mcp"
        rows: list[dict[str, Any]] = []
        try:
            wait_port(gateway_port, gateway)
            for run in range(args.runs):
                rows.append(one_process(claude, work, url, first=run == 0))
                print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
        finally:
            gateway.terminate()
            gateway.wait(timeout=20)
        said = (Path(tmp) / "gateway.log").read_text(errors="replace")
        (cc.REPO / "bench" / "out").mkdir(parents=True, exist_ok=True)
        (cc.REPO / "bench" / "out" / "claude_code_sessions.log").write_text(said)  # the last run's, to read
    summary = {
        "processes": len(rows),
        "started_with_earlier_set": sum(bool(row["first_has_tool"]) for row in rows[1:]),
        "outcomes": dict(Counter(row["outcome"] for row in rows)),
        # requests the gateway could not place in a process (another copy ran): sessions of their own
        "requests_placed_apart": said.count("copies of this client run here"),
        "busy": args.busy,
    }
    print(json.dumps({"summary": summary, "rows": rows} if args.json else summary))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
