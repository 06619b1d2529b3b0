"""What the traffic observer costs a proxied call: microseconds per ``TrafficObserver.observe``.

    .venv/bin/python bench/traffic_cost.py [--calls 2000]

Each call takes 3 arguments, one of them an id from the previous result (a sighting each time), and
returns a result of N scalar leaves (ids, numbers, words, booleans; N = 10, 50, 256 and 2,000: the last
is cut at ``MAX_LEAVES``), as structured content and as JSON text only (parsed by the observer). One
session; the window fills and stays full. Timings need a quiet machine to mean much.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

import mcp_types as types

from toolweave.server.calls.traffic import TrafficObserver


def result_of(n: int, call: int) -> dict[str, Any]:
    rows = [
        {"id": f"ID-{call}-{i}", "price": 100.25 + i, "state": "open", "ok": i % 2 == 0}
        for i in range((n + 3) // 4)
    ]
    return {"items": rows}


def run(leaves: int, calls: int, as_text: bool) -> float:
    observer = TrafficObserver()
    previous = result_of(leaves, 0)
    started = time.perf_counter()
    for call in range(1, calls + 1):
        value = result_of(leaves, call)
        result = (
            types.CallToolResult(content=[types.TextContent(type="text", text=json.dumps(value))])
            if as_text
            else types.CallToolResult(content=[], structured_content=value)
        )
        arguments = {"id": previous["items"][0]["id"], "note": "please hurry", "quantity": 3}
        observer.observe("s", f"t__tool{call % 7}", arguments, result, call)
        previous = value
    return (time.perf_counter() - started) / calls * 1e6


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    args = parser.parse_args()
    # the results are built inside the loop: time the building alone and subtract it
    for leaves in (10, 50, 256, 2000):
        started = time.perf_counter()
        for call in range(args.calls):
            result_of(leaves, call)
        build = (time.perf_counter() - started) / args.calls * 1e6
        for as_text in (False, True):
            us = run(leaves, args.calls, as_text) - build
            kind = "JSON text" if as_text else "structured"
            print(f"{leaves:>5} leaves, {kind:10}: {us:8.1f} µs per call")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
