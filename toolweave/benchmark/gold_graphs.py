"""The gold dependency graphs of ``../shared/datasets`` as inference is calibrated on them.

Each folder of ``calibration.GOLD_FAMILIES`` gives its tools as the product would ingest them and its
gold edges. OpenAPI-links' operations are read from the specs in its ``raw/`` folder by the OpenAPI
adapter: the folder's ``tools.jsonl`` drops the response schemas a real OpenAPI fleet has (the edges
are the folder's). Used by ``bench/inference.py calibrate`` and the test that the shipped table is
what calibration gives.
"""

from __future__ import annotations

from collections.abc import Sequence

from toolweave.adapters.openapi.parser import parse_spec_file
from toolweave.benchmark.datasets import resolve_dataset
from toolweave.benchmark.openapi_links import LINK_PAIRS
from toolweave.records import DependencyEdge, ToolRecord
from toolweave.registry.catalog import load_catalog
from toolweave.registry.inference import propose_edges, rule_of
from toolweave.registry.inference.calibration import GOLD_FAMILIES

__all__ = ["all_rule_counts", "gold_graph", "rule_counts"]


def gold_graph(name: str) -> tuple[list[ToolRecord], list[DependencyEdge]]:
    """A gold graph's tools (as the product would ingest them) and its gold edges."""
    path = resolve_dataset(name)
    catalog = load_catalog([path], path.name, require_description=False)
    if name != "openapi_links":
        return catalog.tools, catalog.edges
    by_name = {t.name.lower(): t for t in catalog.tools}
    tools = []
    for spec, openapi, _arazzo in LINK_PAIRS:
        for op in parse_spec_file(str(path / "raw" / openapi), source=spec).operations:
            # the catalog's id and text, the adapter's schemas (a case quirk of one spec: `PAR` / `Par`)
            row = by_name[f"{spec}:{op.operation_id}".lower()]
            update = {"input_schema": op.tool.input_schema, "output_schema": op.tool.output_schema}
            tools.append(row.model_copy(update=update))
    return tools, catalog.edges


def rule_counts(tools: Sequence[ToolRecord], gold: Sequence[DependencyEdge]) -> dict[str, tuple[int, int]]:
    """Per rule: (proposed pairs that are gold edges, proposed pairs); rules only (no similarity pass)."""
    pairs = {(e.tool, e.depends_on) for e in gold}
    by_rule: dict[str, set[tuple[str, str]]] = {}
    for e in propose_edges(tools):
        by_rule.setdefault(rule_of(e), set()).add((e.tool, e.depends_on))
    return {r: (len(found & pairs), len(found)) for r, found in sorted(by_rule.items())}


def all_rule_counts() -> dict[str, dict[str, tuple[int, int]]]:
    """``rule_counts`` on every gold graph (``calibration.GOLD_FAMILIES``)."""
    return {name: rule_counts(*gold_graph(name)) for name in GOLD_FAMILIES}
