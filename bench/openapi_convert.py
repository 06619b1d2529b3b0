"""OpenAPI adapter: conversion of the 8 vendor specs (tools, validity, size, time; GitHub v3 timed
separately) and dependency edges of ../shared/datasets/openapi_links vs its gold.

    .venv/bin/python bench/openapi_convert.py [--json] [--repeat N]

Timings include reading and parsing the YAML (a fresh loader per run, nothing cached between runs).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import jsonschema

from toolweave.adapters.openapi.links import spec_edges
from toolweave.adapters.openapi.loader import SpecLoader
from toolweave.adapters.openapi.parser import HTTP_METHODS, gc_paused, parse_spec_file
from toolweave.benchmark.openapi_links import found_edges, gold_edges

ROOT = Path(__file__).resolve().parents[1]
DATASETS = ROOT / ".." / "shared" / "datasets"
SPECS = DATASETS / "openapi_specs" / "specs"
LINKS = DATASETS / "openapi_links"


def _machine() -> dict[str, Any]:
    try:
        rev = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=False
        ).stdout.strip()
    except OSError:
        rev = "?"
    return {
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "commit": rev,
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "machine": platform.machine(),
    }


def convert_specs() -> list[dict[str, Any]]:
    rows = []
    for path in sorted(SPECS.glob("*.yaml")):
        loader = SpecLoader()
        t0 = time.perf_counter()
        with gc_paused():  # as parse_spec_file does
            doc, _ = loader.load(str(path))
        t_load = time.perf_counter() - t0
        parsed = parse_spec_file(str(path), source=path.stem.split("_")[0], loader=loader)
        t_convert = time.perf_counter() - t0 - t_load
        t1 = time.perf_counter()
        edges = spec_edges(parsed)
        t_edges = time.perf_counter() - t1
        operations = sum(1 for item in doc["paths"].values() for m in HTTP_METHODS if m in item)
        invalid = 0
        for tool in parsed.tools:
            try:
                jsonschema.Draft202012Validator.check_schema(tool.input_schema)
            except jsonschema.SchemaError:
                invalid += 1
        blob = json.dumps([t.model_dump(mode="json") for t in parsed.tools])
        rows.append(
            {
                "spec": path.name,
                "version": parsed.version,
                "operations": operations,
                "tools": len(parsed.tools),
                "problems": len(parsed.problems),
                "invalid_input_schemas": invalid,
                "json_bytes": len(blob),
                "edges": len(edges),
                "load_s": round(t_load, 3),
                "convert_s": round(t_convert, 3),
                "edges_s": round(t_edges, 3),
            }
        )
    return rows


def time_github(repeat: int) -> dict[str, Any]:
    path = SPECS / "github_github_v3.yaml"
    runs = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        parsed = parse_spec_file(str(path), source="github", loader=SpecLoader())
        with gc_paused():  # as OpenAPIBackend.load does
            spec_edges(parsed)
        runs.append(time.perf_counter() - t0)
    return {
        "spec": path.name,
        "tools": len(parsed.tools),
        "runs": repeat,
        "min_s": round(min(runs), 2),
        "median_s": round(statistics.median(runs), 2),
        "max_s": round(max(runs), 2),
    }


def links_quality() -> list[dict[str, Any]]:
    gold, from_links = gold_edges(LINKS)
    rows = []
    for label, infer in (("declared (links + Arazzo)", False), ("declared + inferred", True)):
        found, _ = found_edges(LINKS, infer=infer)
        hits = len(found & gold)
        rows.append(
            {
                "edges": label,
                "gold": len(gold),
                "found": len(found),
                "correct": hits,
                "precision": round(hits / len(found), 3) if found else 0.0,
                "recall": round(hits / len(gold), 3) if gold else 0.0,
                "link_edges_recovered": f"{len(from_links & found)}/{len(from_links)}",
            }
        )
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="One JSON object instead of tables.")
    parser.add_argument("--repeat", type=int, default=3, help="GitHub v3 timing runs (default 3).")
    args = parser.parse_args()
    if not SPECS.is_dir() or not LINKS.is_dir():
        print(f"skipped: {SPECS} or {LINKS} is absent (../shared/datasets beside the repository)")
        return 0
    report: dict[str, Any] = {
        "machine": _machine(),
        "specs": convert_specs(),
        "github": time_github(args.repeat),
        "links": links_quality(),
    }
    total_ops = sum(r["operations"] for r in report["specs"])
    total_tools = sum(r["tools"] for r in report["specs"])
    report["totals"] = {
        "operations": total_ops,
        "tools": total_tools,
        "invalid_input_schemas": sum(r["invalid_input_schemas"] for r in report["specs"]),
    }
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    m = report["machine"]
    print(f"{m['date']}  commit {m['commit']}  Python {m['python']}  {m['cpus']} CPUs")
    print(
        f"{'spec':40s} {'ver':6s} {'ops':>5s} {'tools':>5s} {'bad':>4s} {'probl':>5s} {'MB':>6s} "
        f"{'edges':>5s} {'load s':>7s} {'conv s':>7s}"
    )
    for r in report["specs"]:
        print(
            f"{r['spec']:40s} {r['version']:6s} {r['operations']:5d} {r['tools']:5d} "
            f"{r['invalid_input_schemas']:4d} {r['problems']:5d} {r['json_bytes'] / 1e6:6.2f} "
            f"{r['edges']:5d} {r['load_s']:7.2f} {r['convert_s']:7.2f}"
        )
    t = report["totals"]
    print(
        f"total: {t['operations']} operations -> {t['tools']} tools, "
        f"{t['invalid_input_schemas']} invalid input schemas"
    )
    g = report["github"]
    print(
        f"GitHub v3 ({g['tools']} tools, load + convert + edges): min {g['min_s']} s, "
        f"median {g['median_s']} s over {g['runs']} runs"
    )
    for r in report["links"]:
        print(
            f"openapi_links {r['edges']}: P {r['precision']}  R {r['recall']}  "
            f"({r['correct']}/{r['found']} found, {r['gold']} gold; "
            f"Link Object edges recovered {r['link_edges_recovered']})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
