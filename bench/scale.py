"""Scale benchmark: synthetic fleets of 10k, 50k and 100k tools built from the
datasets' tools; ingest rate, find_tools retrieval p50/p95 (the real pipeline), recall@30 of the ANN
first pass against exact search, and the process's RSS.

    .venv/bin/python bench/scale.py --size 10000 --size 100000      # default: 10k, 50k and 100k
    .venv/bin/python bench/scale.py --size 100000 --vectors composed   # 100k from composed vectors
    .venv/bin/python bench/scale.py --ingest 2000 --size 100000 --vectors composed   # ingest rate at 100k

The fleet: every dataset's tools (ToolLinkOS, API-Bank, MetaTool, Seal-Tools, OpenAPI links), the
synthetic domain x action x object tools of ``gateway_bench.synthetic_tools`` (up to 10k), then
per-domain variants of the normalized datasets' tools ("Billing: <description>", their declared
edges renamed along; one source per four domains, ~17k tools) until the size is reached. Fleets are nested:
the 10k fleet is the start of the 50k one.

Embeddings: the real embedder behind the benchmarks' shared disk cache (``CachedEmbedder``,
``~/.cache/toolweave/embeddings.sqlite``, keyed by sha256(model, document text)). The build step
times the embedding of the texts the cache lacks: that is the embedding rate. The ingest rate is then
measured into a fresh registry with every vector from the cache, so it times the registry's own work
(rows, full-text index, dependency inference, commits, ANN index); both are reported, with what was
cached. ``--vectors composed`` embeds only the datasets' own tools and the parts variants are made
of (see ``prepare``): minutes instead of hours for 100k on a shared machine.

Each size runs in its own process (RSS is the process's, measured after opening the registry and
after the queries). Needs ../shared/datasets beside the repository (skipped without it).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

# This script runs each step in its own process and gathers the report; the fleet, its vectors and the
# steps themselves live in scale_fleet.py, scale_vectors.py, scale_ingest.py and scale_measure.py.

from gateway_bench import TOOLLINKOS, machine  # noqa: E402
from scale_fleet import OUT, registry_dir  # noqa: E402
from scale_ingest import build, ingest_new  # noqa: E402
from scale_measure import measure  # noqa: E402

SIZES = (10_000, 50_000, 100_000)


def _child(args: list[str]) -> dict[str, Any]:
    """One step in a fresh process (so RSS is that step's), its last stdout line as JSON."""
    OUT.mkdir(parents=True, exist_ok=True)
    with (OUT / "steps.log").open("a") as log:  # the step's progress, to follow a long build
        proc = subprocess.run(
            [sys.executable, __file__, *args], stdout=subprocess.PIPE, stderr=log, text=True
        )
    if proc.returncode != 0:
        raise RuntimeError(f"{args}: exit {proc.returncode}; see {OUT / 'steps.log'}")
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def main(ns: argparse.Namespace) -> int:
    if not TOOLLINKOS.exists():
        print(f"skipped: {TOOLLINKOS} is absent", file=sys.stderr)
        return 0
    report: dict[str, Any] = {"machine": machine()}
    if ns.ingest:
        ingest_runs(ns, report)
    for size in [] if ns.ingest else ns.size or SIZES:
        key = f"{size}-{ns.vectors}"
        row: dict[str, Any] = {}
        if ns.rebuild or not (registry_dir(size, ns.vectors) / "built.json").exists():
            row["build"] = _child(["--step", "build", "--size", str(size), "--vectors", ns.vectors])
        for threshold in ns.threshold or [None]:
            extra = [] if threshold is None else ["--threshold", str(threshold)]
            step = [
                "--step",
                "measure",
                "--size",
                str(size),
                "--vectors",
                ns.vectors,
                "--queries",
                str(ns.queries),
            ]
            row[f"measure_threshold_{threshold or 'default'}"] = _child(step + extra)
        report[key] = row
        print(json.dumps({key: row}), flush=True)
    OUT.mkdir(parents=True, exist_ok=True)
    with (OUT / "results.jsonl").open("a") as f:
        f.write(json.dumps(report) + "\n")
    return 0


def ingest_runs(ns: argparse.Namespace, report: dict[str, Any]) -> None:
    """``--ingest N``: for each size, the new sources with vectors ready, then with real embeddings."""
    for size in ns.size or SIZES:
        key = f"ingest-{ns.ingest}-into-{size}-{ns.vectors}"
        step = ["--step", "ingest", "--size", str(size), "--vectors", ns.vectors, "--ingest", str(ns.ingest)]
        report[key] = {e: _child([*step, "--embedding", e]) for e in ("cached", "real")}
        print(json.dumps({key: report[key]}), flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--size", type=int, action="append", help="fleet size (repeatable; default 10k 50k 100k)"
    )
    parser.add_argument("--vectors", choices=("real", "composed"), default="real", help="see prepare()")
    parser.add_argument("--queries", type=int, default=200, help="timed find_tools calls per size")
    parser.add_argument(
        "--threshold", type=int, action="append", help="vector_index_threshold for a measure run (repeatable)"
    )
    parser.add_argument("--rebuild", action="store_true", help="ingest again even if the registry exists")
    parser.add_argument("--resume", type=Path, help="build: start from a copy of this registry")
    parser.add_argument("--no-infer", action="store_true", help="build: without dependency inference")
    parser.add_argument("--registry", type=Path, help="measure: this registry instead of the size's own")
    parser.add_argument(
        "--ingest",
        type=int,
        metavar="N",
        help="instead of build + measure: time ingesting a new source of N tools into a copy of the built "
        "registry of each size, with vectors ready and with real embeddings (see ingest_new())",
    )
    parser.add_argument("--embedding", choices=("cached", "real"), help=argparse.SUPPRESS)
    parser.add_argument("--step", choices=("build", "measure", "ingest"), help=argparse.SUPPRESS)
    ns = parser.parse_args()
    if ns.step == "ingest":
        print(json.dumps(ingest_new(ns.size[0], ns.vectors, ns.ingest, ns.embedding)))
    elif ns.step == "build":
        print(json.dumps(build(ns.size[0], ns.vectors, resume=ns.resume, infer=not ns.no_infer)))
    elif ns.step == "measure":
        threshold = ns.threshold[0] if ns.threshold else None
        print(json.dumps(measure(ns.size[0], ns.vectors, ns.queries, threshold, ns.registry)))
    else:
        sys.exit(main(ns))
