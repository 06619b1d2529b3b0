"""Ingest speed: cold ingest of ToolLinkOS, re-ingest of the unchanged catalog (in process and as a
whole `toolweave ingest-catalog` command), and one changed tool.

    .venv/bin/python bench/ingest.py [--json]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from toolweave.registry import Embedder, Registry, load_catalog
from toolweave.settings import Settings

DATASET = Path(__file__).resolve().parents[1] / ".." / "shared" / "datasets" / "toollinkos"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if not DATASET.is_dir():
        sys.exit(f"skipped: {DATASET} is absent")
    catalog = load_catalog([DATASET], "toollinkos")
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "reg"
        embedder = Embedder()
        embedder.embed_query("warm up the model")
        t0 = time.perf_counter()
        reg = Registry.open(home, embedder=embedder, settings=Settings(infer_dependencies=False))
        cold = reg.ingest("toollinkos", catalog.tools, catalog.edges)
        cold_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        again = reg.ingest("toollinkos", catalog.tools, catalog.edges)
        again_s = time.perf_counter() - t0
        changed = [catalog.tools[0].model_copy(update={"description": "Changed."}), *catalog.tools[1:]]
        t0 = time.perf_counter()
        one = reg.ingest("toollinkos", changed, catalog.edges)
        one_s = time.perf_counter() - t0
        cli = Path(sys.executable).parent / "toolweave"
        command = [
            str(cli),
            "ingest-catalog",
            str(DATASET),
            "--source",
            "toollinkos",
            "--registry",
            str(home),
        ]
        subprocess.run(command, check=True, capture_output=True)  # back to the unchanged catalog
        t0 = time.perf_counter()
        out = subprocess.run(command, check=True, capture_output=True, text=True).stdout.strip()
        cli_s = time.perf_counter() - t0
    row = {
        "tools": len(catalog.tools),
        "cold_ingest_s": round(cold_s, 2),
        "cold_embedded": cold.embedded,
        "reingest_unchanged_s": round(again_s, 3),
        "reingest_unchanged_embedded": again.embedded,
        "one_changed_s": round(one_s, 3),
        "one_changed_embedded": one.embedded,
        "cli_reingest_unchanged_wall_s": round(cli_s, 2),
        "cli_summary": out,
    }
    print(json.dumps(row) if args.json else "\n".join(f"{k}: {v}" for k, v in row.items()))


if __name__ == "__main__":
    main()
