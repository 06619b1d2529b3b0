"""Restarts on an unchanged manifest write nothing: `toolweave serve`
on the demo manifest, started N times over stdio on a copy of an already built registry, each run until
its start-up writes are done (the manifest's overrides, sources, the upstreams' tool lists: "gateway
ready" and every upstream's tool list in its log, then a few seconds more); then the registry's committed
generation and its file count, before and after.

Usage: .venv/bin/python bench/restart_versions.py [--runs 20] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from first_find import INIT, INITIALIZED, _line  # noqa: E402
from gateway_bench import TOOLWEAVE, machine  # noqa: E402
from startup import demo_registry  # noqa: E402

SETTLE_S = 3.0
"""After every upstream reported, this long more: the start-up writes run in the background."""


def generation(registry: Path) -> int:
    from toolweave.registry import Registry
    from toolweave.settings import Settings

    opened = Registry.open(registry, settings=Settings(home=registry))
    try:
        return opened.loaded_generation
    finally:
        opened.close()


def files(registry: Path) -> int:
    return sum(len(names) for _, _, names in os.walk(registry))


def one_start(manifest: Path, registry: Path, log: Path) -> None:
    args = [*TOOLWEAVE.split(), "serve", "--manifest", str(manifest), "--registry", str(registry)]
    env = dict(os.environ, TOOLWEAVE_LOG_LEVEL="INFO")
    with log.open("wb") as err:
        proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, env=env)
    assert proc.stdin is not None
    proc.stdin.write(_line(1, "initialize", INIT) + INITIALIZED)
    find = {"name": "find_tools", "arguments": {"query": "what time is it"}}
    proc.stdin.write(_line(2, "tools/call", find))
    proc.stdin.flush()
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        text = log.read_text(errors="replace")
        if "gateway ready" in text and all(f"{s}: " in text for s in ("time", "git", "memory")):
            break
        time.sleep(0.2)
    time.sleep(SETTLE_S)
    proc.stdin.close()
    proc.wait(60)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--json", action="store_true")
    ns = parser.parse_args()
    manifest, built = demo_registry()
    with tempfile.TemporaryDirectory(prefix="toolweave-restarts-") as tmp:
        registry = Path(tmp) / "registry"
        shutil.copytree(built, registry)
        log = Path(tmp) / "gateway.log"
        one_start(manifest, registry, log)  # a first start may record what an older one did not
        before = {"generation": generation(registry), "files": files(registry)}
        for _ in range(ns.runs):
            one_start(manifest, registry, log)
        after = {"generation": generation(registry), "files": files(registry)}
    report: dict[str, Any] = {"machine": machine(), "runs": ns.runs, "before": before, "after": after}
    report["new_versions"] = after["generation"] - before["generation"]
    print(json.dumps(report, indent=None if ns.json else 2))


if __name__ == "__main__":
    main()
