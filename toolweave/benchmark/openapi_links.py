"""The openapi_links dataset (``../shared/datasets/openapi_links``): its gold dependency edges and the
edges the OpenAPI adapter finds in its specs, both as ``("spec:operationId", "spec:operationId")`` pairs
(dependent first). Shared by ``bench/openapi_convert.py`` and the adapter's tests."""

from __future__ import annotations

import json
from pathlib import Path

from toolweave.adapters.openapi.links import spec_edges
from toolweave.adapters.openapi.parser import parse_spec_file
from toolweave.records import DependencyEdge

__all__ = ["LINK_PAIRS", "OperationPair", "found_edges", "gold_edges"]

OperationPair = tuple[str, str]

LINK_PAIRS = [
    ("pet-coupons", "pet-coupons.openapi.yaml", ["pet-coupons.arazzo.yaml"]),
    ("bnpl", "bnpl-openapi.yaml", ["bnpl-arazzo.yaml"]),
    ("oauth", "oauth.openapi.yaml", ["oauth.arazzo.yaml"]),
    ("FAPI-PAR", "FAPI-PAR.openapi.yaml", ["FAPI-PAR.arazzo.yaml"]),
    ("link-example", "link-example.yaml", []),
]
"""(spec name used in the gold, OpenAPI file, Arazzo files) in the dataset's ``raw/`` folder."""


def gold_edges(links_dir: Path) -> tuple[set[OperationPair], set[OperationPair]]:
    """(every gold edge, the gold edges written as Link Objects)."""
    everything: set[OperationPair] = set()
    from_links: set[OperationPair] = set()
    for line in (links_dir / "tools.jsonl").read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        spec = row["name"].split(":", 1)[0]
        everything |= {(row["name"], dep) for dep in row["depends_on"]}
        from_links |= {(f"{spec}:{link['operationId']}", row["name"]) for link in row["openapi_links"]}
    return everything, from_links


def found_edges(links_dir: Path, *, infer: bool) -> tuple[set[OperationPair], list[DependencyEdge]]:
    """The edges ``spec_edges`` finds in every spec (with its Arazzo files; inferred ones too if ``infer``),
    as pairs and as they are."""
    found: set[OperationPair] = set()
    edges: list[DependencyEdge] = []
    raw = links_dir / "raw"
    for spec, openapi, arazzo in LINK_PAIRS:
        parsed = parse_spec_file(str(raw / openapi), source=spec)
        names = {op.tool.id: f"{spec}:{op.operation_id}" for op in parsed.operations}
        for edge in spec_edges(parsed, arazzo=[str(raw / a) for a in arazzo], infer=infer):
            found.add((names[edge.tool], names[edge.depends_on]))
            edges.append(edge)
    return found, edges
