"""The turn loop with real clients: published names vs the budget, and whether a client that
re-lists on list_changed holds the newly found tool when the find_tools result arrives.

    .venv/bin/python bench/turnloop.py [--runs N] [--json]

* names: every tool id of the 8 vendor OpenAPI specs (source = the file's first word, e.g. `github`),
  published through ``NameMap`` with the default budget (48): how many ids are over budget, the longest
  published name, collisions.
* ts-http: `toolweave serve --transport http` in front of the PyPI time server (registry built once in a
  temp dir); the TypeScript SDK client (tests/e2e/ts_client.mjs, SDK from the npm cache the e2e tests
  use) runs N times, each a fresh session asking "what time is it in Tokyo"; counted: runs whose client
  list held `time__get_current_time` when the result arrived. Once with `publish.relist_wait_ms` = 300
  (default) and once with 0 (the old behaviour). ts-stdio: the same over stdio, the client spawning a
  gateway for every run. Needs node and that npm install.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ports import free_port, wait_port

ROOT = Path(__file__).resolve().parents[1]
SPECS = ROOT / ".." / "shared" / "datasets" / "openapi_specs" / "specs"
TS_CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "toolweave-tests" / "ts-sdk-1.32"
TOOLWEAVE = str(Path(sys.executable).parent / "toolweave")
QUERY = "what time is it in Tokyo"


def names_figures(budget: int = 48) -> dict[str, Any]:
    from toolweave.adapters.openapi.parser import parse_spec_file
    from toolweave.server.turns.names import NameMap

    rows = {}
    for path in sorted(SPECS.glob("*.yaml")):
        ids = [t.id for t in parse_spec_file(str(path), source=path.stem.split("_")[0]).tools]
        names = NameMap(budget, ids.copy)
        published = [names.name(i) for i in ids]
        rows[path.stem] = {
            "tools": len(ids),
            "ids_over_budget": sum(len(i) > budget for i in ids),
            "longest_id": max(map(len, ids), default=0),
            "longest_published": max(map(len, published), default=0),
            "collisions": len(published) - len(set(published)),
            "round_trip_ok": all(names.tool_id(n) in (None, i) for n, i in zip(published, ids, strict=True)),
        }
    return rows


def ts_http_runs(registry: Path, manifest: Path, runs: int, wait_ms: int) -> dict[str, Any]:
    port = free_port()
    env = {**os.environ, "TOOLWEAVE_PUBLISH__RELIST_WAIT_MS": str(wait_ms), "TOOLWEAVE_LOG_LEVEL": "WARNING"}
    proc = subprocess.Popen(
        [
            TOOLWEAVE,
            "serve",
            "-m",
            str(manifest),
            "--registry",
            str(registry),
            "-t",
            "http",
            "--port",
            str(port),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    held = 0
    try:
        wait_port(port, proc)
        for _ in range(runs):
            out = subprocess.run(
                ["node", str(TS_CACHE / "ts_client.mjs"), "http", f"http://127.0.0.1:{port}/mcp", QUERY],
                capture_output=True,
                text=True,
                timeout=120,
                check=True,
            ).stdout
            seen = json.loads(out.strip().splitlines()[-1])
            held += "time__get_current_time" in seen["atResult"]
    finally:
        proc.terminate()
        proc.wait(20)
    return {"relist_wait_ms": wait_ms, "runs": runs, "tool_listed_at_result": held}


def ts_stdio_runs(registry: Path, manifest: Path, runs: int, wait_ms: int) -> dict[str, Any]:
    """Like ``ts_http_runs`` over stdio: the client spawns a gateway for every run."""
    env = {**os.environ, "TOOLWEAVE_PUBLISH__RELIST_WAIT_MS": str(wait_ms), "TOOLWEAVE_LOG_LEVEL": "WARNING"}
    command = json.dumps([TOOLWEAVE, "serve", "-m", str(manifest), "--registry", str(registry)])
    held = failed = 0
    for _ in range(runs):
        done = subprocess.run(
            ["node", str(TS_CACHE / "ts_client.mjs"), "stdio", command, QUERY],
            capture_output=True,
            text=True,
            timeout=900,
            env=env,
        )
        if done.returncode != 0:  # e.g. a gateway too slow to start on an overloaded machine
            failed += 1
            continue
        held += "time__get_current_time" in json.loads(done.stdout.strip().splitlines()[-1])["atResult"]
    return {"relist_wait_ms": wait_ms, "runs": runs, "failed_runs": failed, "tool_listed_at_result": held}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--stdio-runs", type=int, default=5, help="each spawns a gateway: slower")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    report: dict[str, Any] = {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": f"{platform.node()} {os.cpu_count()} cpu, Python {platform.python_version()}",
        "commit": subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True
        ).stdout.strip(),
        "names": names_figures(),
    }
    if shutil.which("node") and (TS_CACHE / "node_modules" / "@modelcontextprotocol" / "sdk").exists():
        shutil.copyfile(ROOT / "tests" / "e2e" / "ts_client.mjs", TS_CACHE / "ts_client.mjs")
        with tempfile.TemporaryDirectory() as tmp:
            registry, manifest = Path(tmp) / "registry", Path(tmp) / "m.yaml"
            manifest.write_text(
                f"servers:\n  time:\n    command: {sys.executable}\n"
                "    args: [-m, mcp_server_time, --local-timezone, UTC]\n"
            )
            report["ts_http"] = [ts_http_runs(registry, manifest, args.runs, w) for w in (300, 0)]
            report["ts_stdio"] = [ts_stdio_runs(registry, manifest, args.stdio_runs, w) for w in (300, 0)]
    else:
        report["ts_http"] = "skipped: node or the npm-cached TypeScript SDK (run the e2e tests once) missing"
    print(json.dumps(report, indent=2) if args.json else json.dumps(report))


if __name__ == "__main__":
    main()
