"""A writer process for tests/registry/test_registry_replicas.py: ingests sources into one registry in
rounds, each round changing every description (so every round writes). Not a test module."""

from __future__ import annotations

import sys

from toolweave.records import DependencyEdge, EdgeKind, ToolRecord
from toolweave.registry import Registry


def batch(source: str, round_: int) -> tuple[list[ToolRecord], list[DependencyEdge]]:
    tools = [
        ToolRecord(
            id=f"{source}__t{n}", source=source, name=f"t{n}", description=f"{source} tool {n} round {round_}"
        )
        for n in range(6)
    ]
    edges = [
        DependencyEdge(
            tool=f"{source}__t{n}", depends_on=f"{source}__t0", kind=EdgeKind.TOOL_DIRECTLY_DEPENDS_ON
        )
        for n in range(1, 6)
    ]
    return tools, edges


def main() -> None:
    path, rounds, sources = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    registry = Registry.open(path)
    for round_ in range(rounds):
        for source in sources:
            registry.ingest(source, *batch(source, round_))
    print("done", flush=True)


if __name__ == "__main__":
    main()
