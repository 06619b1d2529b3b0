"""Ingest speed: cold ingest of ToolLinkOS, re-ingest of the unchanged catalog (in process and as a
whole `toolweave ingest-catalog` command), and one changed tool. With ``--fleet N``, also in a registry
of N tools (ToolLinkOS plus renamed copies): open, unchanged re-ingest of one source, one changed tool
(a full commit: rows, index, edge table, commit record).

    .venv/bin/python bench/ingest.py [--json] [--fleet 10000]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from toolweave.registry import Catalog, Embedder, Registry, load_catalog
from toolweave.settings import Settings

DATASET = Path(__file__).resolve().parents[1] / ".." / "shared" / "datasets" / "toollinkos"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--fleet", type=int, default=0, help="also measure in a registry of this many tools")
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
    if args.fleet:
        row.update(fleet(catalog, args.fleet))
    print(json.dumps(row) if args.json else "\n".join(f"{k}: {v}" for k, v in row.items()))


def fleet(catalog: Catalog, size: int) -> dict[str, object]:
    """Timings in a registry of ``size`` tools: ToolLinkOS and renamed copies of it (sources copy1, ...)."""
    embedder = Embedder()
    settings = Settings(infer_dependencies=False)
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "fleet"
        reg = Registry.open(home, embedder=embedder, settings=settings)
        reg.ingest("toollinkos", catalog.tools, catalog.edges)
        copy = 0
        while len(reg) < size:
            copy += 1
            source = f"copy{copy}"
            take = catalog.tools[: size - len(reg)]
            ids = {t.id: t.id.replace("toollinkos__", f"{source}__", 1) for t in take}
            tools = [t.model_copy(update={"id": ids[t.id], "source": source}) for t in take]
            edges = [
                e.model_copy(update={"tool": ids[e.tool], "depends_on": ids[e.depends_on]})
                for e in catalog.edges
                if e.tool in ids and e.depends_on in ids
            ]
            reg.ingest(source, tools, edges)
        reg.close()
        t0 = time.perf_counter()
        reg = Registry.open(home, embedder=embedder, settings=settings)
        open_s = time.perf_counter() - t0
        unchanged = []
        for _ in range(5):
            t0 = time.perf_counter()
            reg.ingest("toollinkos", catalog.tools, catalog.edges)
            unchanged.append(time.perf_counter() - t0)
        changed = [catalog.tools[0].model_copy(update={"description": "Changed."}), *catalog.tools[1:]]
        t0 = time.perf_counter()
        one = reg.ingest("toollinkos", changed, catalog.edges)
        one_s = time.perf_counter() - t0
        return {
            "fleet_tools": len(reg),
            "fleet_edges": len(reg.edges()),
            "fleet_open_s": round(open_s, 2),
            "fleet_reingest_unchanged_median_s": round(sorted(unchanged)[2], 3),
            "fleet_one_changed_s": round(one_s, 3),
            "fleet_one_changed_embedded": one.embedded,
        }


if __name__ == "__main__":
    main()
