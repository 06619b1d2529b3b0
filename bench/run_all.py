"""`make bench`: every benchmark runner in bench/, one after another (figures recorded in RESULTS.md).

Each runner prints its own figures (JSON lines where it can); this driver only runs them and reports
which failed. A runner whose data is absent (../shared beside the repository) says so and is skipped; a
runner listed here that is not in bench/ fails the run (a list that names a runner which never existed
used to pass in silence).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).parent
RUNNERS = [
    ["retrieval.py"],
    ["ingest.py", "--json"],
    ["openapi_convert.py"],
    ["gateway_bench.py"],
    ["startup.py"],
    ["ready_quality.py"],
    ["inference.py", "graphs"],
    ["scale.py"],
    ["bfcl_replay.py", "--json"],
]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--scale-size",
        type=int,
        action="append",
        help="scale.py fleet size (repeatable; default: 10k, 50k, 100k)",
    )
    ns = parser.parse_args()
    failed = []
    for runner, *args in RUNNERS:
        if runner == "scale.py":
            args += [a for n in ns.scale_size or [] for a in ("--size", str(n))]
        path = HERE / runner
        if not path.exists():
            print(f"== {runner}: no such runner in bench/", file=sys.stderr, flush=True)
            failed.append(runner)
            continue
        print(f"== {runner} {' '.join(args)}", flush=True)
        if subprocess.run([sys.executable, str(path), *args]).returncode != 0:
            failed.append(runner)
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
