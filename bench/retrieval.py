"""Retrieval benchmark suite: every dataset and method we record in bench/HISTORY.md.

    .venv/bin/python bench/retrieval.py            # the full suite (≈15 min on 2 cores)
    .venv/bin/python bench/retrieval.py --quick    # ToolLinkOS only
    .venv/bin/python bench/retrieval.py --only metatool --only seal_tools
    .venv/bin/python bench/retrieval.py --table     # all datasets × {bm25, vector, hybrid, grtf-declared,
                                                    # grtf-inferred}, first pass shared (no latency)

Embeddings come from the disk cache (``toolweave.benchmark.embedding_cache``): a second run embeds
nothing. ``--no-floor`` scores full K-length lists (the relevance floor shortens them by design).

Prints one JSON line per (dataset, query file, method, split, setting) and a Markdown table at the
end; JSON lines are also appended to bench/out/retrieval.jsonl. Index builds are shared per dataset.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import time
from pathlib import Path

from toolweave.benchmark import load_dataset, run_benchmark
from toolweave.benchmark.embedding_cache import CachedEmbedder
from toolweave.registry import Embedder
from toolweave.settings import RetrievalSettings

OUT = Path(__file__).parent / "out"
METHODS = ("bm25", "vector", "hybrid", "grtf")


Run = tuple[str, list[dict[str, object]], dict[str, object]]


def _m(*methods: str, **params: object) -> list[dict[str, object]]:
    return [{"method": m, **params} for m in methods]


def suite(quick: bool) -> list[Run]:
    """(dataset, retrieval parameter sets, options) to run."""
    runs: list[Run] = [
        ("toollinkos", [*_m(*METHODS), *_m("grtf", final_k=30)], {"split": "all"}),
        ("toollinkos", _m("grtf"), {"split": "test"}),
        ("toollinkos", _m("vector", "grtf"), {"split": "test", "examples": True}),
    ]
    if not quick:
        runs += [
            ("toollinkos", _m("grtf"), {"split": "all", "graph": "inferred"}),
            ("api_bank", _m(*METHODS), {}),
            ("metatool", _m("bm25", "vector", "hybrid"), {}),
            ("seal_tools", _m("bm25", "vector", "hybrid"), {}),
        ]
    return runs


TABLE_DATASETS = ("toollinkos", "api_bank", "metatool", "seal_tools")


def table_suite() -> list[Run]:
    """Every dataset × {bm25, vector, hybrid, grtf on the declared graph, grtf on the inferred graph}."""
    runs: list[Run] = []
    for name in TABLE_DATASETS:
        runs.append((name, _m("bm25", "vector", "hybrid", "grtf"), {"share_first_pass": True}))
        runs.append((name, _m("grtf"), {"graph": "inferred", "share_first_pass": True}))
    return runs


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="ToolLinkOS only")
    parser.add_argument("--table", action="store_true", help="the all-datasets table (shared first pass)")
    parser.add_argument("--only", action="append", help="run just these datasets (repeatable)")
    parser.add_argument("--no-floor", action="store_true", help="relevance floor off (full K-length lists)")
    args = parser.parse_args()
    OUT.mkdir(exist_ok=True)
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    stamp = {
        "date": time.strftime("%Y-%m-%d"),
        "commit": commit,
        "machine": f"{platform.machine()} {_cores()} cores",
    }
    embedder = CachedEmbedder(Embedder())
    floor_off = {"floor_relative": 0.0, "floor_absolute": 0.0, "floor_destructive": 0.0}
    rows = []
    for name, methods, options in table_suite() if args.table else suite(args.quick):
        if args.only and name not in args.only:
            continue
        try:
            data = load_dataset(name)
        except Exception as exc:  # a missing folder skips that dataset, with the reason
            print(f"skipped {name}: {exc}", file=sys.stderr)
            continue
        params = [
            RetrievalSettings.model_validate({**p, **(floor_off if args.no_floor else {})}) for p in methods
        ]
        results = run_benchmark(data, params, embedder=embedder, ks=(5, 10, 20, 30), **options)  # type: ignore[arg-type]
        for result in results:
            row = {**result.as_json(), **stamp, "floor": not args.no_floor}
            rows.append(row)
            print(json.dumps(row), flush=True)
            with (OUT / "retrieval.jsonl").open("a") as f:
                f.write(json.dumps(row) + "\n")
    print(markdown(rows))


def markdown(rows: list[dict[str, object]]) -> str:
    cols = ["dataset", "queries", "method", "K", "split", "setting", "mAP@10", "R@10", "R@5", "nDCG@10"]
    cols += ["C@10", "tools/query", "precision", "p50 ms", "p95 ms", "index s"]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        setting = r["shots"] if r["graph"] in ("n/a", "declared") else f"{r['shots']}, {r['graph']} graph"
        lines.append(
            f"| {r['dataset']} | {r['queries_file']} ({r['queries']}) | {r['method']} "
            f"| {r.get('final_k', 10)} | {r['split']} "
            f"| {setting} | {r['map@10']:.3f} | {r['recall@10']:.3f} | {r['recall@5']:.3f} "
            f"| {r['ndcg@10']:.3f} "
            f"| {r['complete@10']:.3f} | {r['returned']:.2f} | {r['precision']:.3f} "
            f"| {r['latency_ms_p50']} | {r['latency_ms_p95']} | {r['index_s']} |"
        )
    return "\n".join(lines)


def _cores() -> int:
    import os

    return os.cpu_count() or 0


if __name__ == "__main__":
    main()
