"""The gold dependency graphs of ``../shared/datasets`` as inference is calibrated on them.

Each folder of ``calibration.GOLD_FAMILIES`` gives its tools as the product would ingest them and its
gold edges. OpenAPI-links' operations are read from the specs in its ``raw/`` folder by the OpenAPI
adapter: the folder's ``tools.jsonl`` drops the response schemas a real OpenAPI fleet has (the edges
are the folder's). BFCL multi-turn declares no edges: its graph is read from the code of its backend
classes (``executable/``, see ``code_graph``), its tools are the folder's function docs. Used by
``bench/inference.py calibrate`` and the test that the shipped table is what calibration gives.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from toolweave.adapters.openapi.parser import parse_spec_file
from toolweave.benchmark.code_graph import code_edges
from toolweave.benchmark.datasets import resolve_dataset
from toolweave.benchmark.openapi_links import LINK_PAIRS
from toolweave.errors import CatalogError
from toolweave.inference import propose_edges, rule_of
from toolweave.inference.calibration import GOLD_FAMILIES
from toolweave.records import DependencyEdge, EdgeKind, ToolRecord
from toolweave.registry.catalog import load_catalog

__all__ = ["CODE_GRAPHS", "all_rule_counts", "code_gold_edges", "gold_graph", "rule_counts"]

CODE_GRAPHS = frozenset({"bfcl_multi_turn"})
"""Folders whose gold graph is read from the code of their ``executable/`` backends."""


def gold_graph(name: str) -> tuple[list[ToolRecord], list[DependencyEdge]]:
    """A gold graph's tools (as the product would ingest them) and its gold edges."""
    path = resolve_dataset(name)
    catalog = load_catalog([path], path.name, require_description=False)
    if name in CODE_GRAPHS:
        return catalog.tools, code_gold_edges(path, catalog.tools)
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


def code_gold_edges(path: Path, tools: Sequence[ToolRecord]) -> list[DependencyEdge]:
    """The edges the backend classes in ``path/executable`` state, between the tools documenting their
    methods (a tool's ``class`` and ``function_name`` name the method)."""
    folder = path / "executable"
    if not folder.is_dir():
        raise CatalogError(f"{path}: no executable/ folder of backend classes to read a graph from")
    by_name = {t.name: t.id for t in tools}
    ids = {}  # (class, method) → tool id; the catalog keeps neither field, the folder's rows have both
    for line in (path / "tools.jsonl").read_text(encoding="utf-8").splitlines():
        row = json.loads(line) if line.strip() else {}
        if row.get("class") and row.get("name") in by_name:
            ids[(row["class"], row.get("function_name", row["name"]))] = by_name[row["name"]]
    edges = []
    for cls, found in code_edges(folder).items():
        for e in found:
            tool, dep = ids.get((cls, e.tool)), ids.get((cls, e.depends_on))
            if tool is None or dep is None:
                continue  # a method no tool documents cannot be retrieved
            kind = EdgeKind.TOOL_DIRECTLY_DEPENDS_ON
            if e.parameter is not None:
                kind = EdgeKind.PARAMETER_DIRECTLY_DEPENDS_ON
            edges.append(
                DependencyEdge(
                    tool=tool, depends_on=dep, kind=kind, parameter_name=e.parameter, reason=e.reason
                )
            )
    return edges
