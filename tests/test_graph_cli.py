"""`toolweave graph stats|show|export` over a real registry, and `toolweave bench-graph`."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from tests.edges import edge
from toolweave.cli import app
from toolweave.inference import infer_edges
from toolweave.records import EdgeKind
from toolweave.registry.catalog import load_catalog
from toolweave.registry.embeddings import Embedder

runner = CliRunner()


@pytest.fixture(scope="module")
def registry_dir(
    tmp_path_factory: pytest.TempPathFactory, dataset_dir: Callable[[str], Path], shared_embedder: Embedder
) -> Path:
    """Built once for the module: every test here only reads it."""
    from toolweave.registry import Registry

    path = tmp_path_factory.mktemp("graph-cli") / "reg"
    cat = load_catalog([dataset_dir("api_bank")], "api_bank", require_description=False)
    reg = Registry.open(path, embedder=shared_embedder)
    try:
        reg.ingest("api_bank", cat.tools)  # no declared edges: the graph is what inference says
        reg.add_edges(infer_edges(cat.tools))
        reg.add_edges(
            [
                edge(
                    "api_bank__QueryStock",
                    "api_bank__GetToday",
                    "date",
                    kind=EdgeKind.PARAMETER_INDIRECTLY_DEPENDS_ON,
                    origin="manifest",
                    reason="today's price unless a date is given",
                )
            ]
        )
    finally:
        reg.close()
    return path


def run(*args: str) -> Any:
    result = runner.invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result


def test_stats(registry_dir: Path) -> None:
    doc = json.loads(run("graph", "stats", "--registry", str(registry_dir), "--json").stdout)
    assert doc["nodes"] == 53
    assert doc["edges_by_origin"]["inferred"] >= 20 and doc["edges_by_origin"]["manifest"] == 1
    assert doc["most_depended_on"][0] == {"tool": "api_bank__GetUserToken", "dependents": 20}
    assert doc["components"] >= 1 and doc["isolated_tools"] > 0
    text = run("graph", "stats", "--registry", str(registry_dir)).stdout
    assert "most depended on" in text and "api_bank__GetUserToken" in text


def test_show_by_name_with_reasons(registry_dir: Path) -> None:
    doc = json.loads(run("graph", "show", "QueryBalance", "--registry", str(registry_dir), "--json").stdout)
    assert doc["tool"] == "api_bank__QueryBalance"
    [dep] = doc["depends_on"]
    assert dep["tool"] == "api_bank__GetUserToken" and dep["parameter"] == "token"
    assert dep["origin"] == "inferred" and dep["reason"] and dep["evidence"]
    users = json.loads(
        run("graph", "show", "api_bank__GetToday", "--registry", str(registry_dir), "--json").stdout
    )
    # GetToday also has inferred dependents (its `date` feeds date inputs, below the walking bar)
    wanted = {"tool": "api_bank__QueryStock", "origin": "manifest"}.items()
    assert any(wanted <= user.items() for user in users["needed_by"])


def test_show_unknown_tool_is_a_clear_error(registry_dir: Path) -> None:
    result = runner.invoke(app, ["graph", "show", "QueryBalanc", "--registry", str(registry_dir)])
    assert result.exit_code == 1
    assert "no tool 'QueryBalanc'" in result.output and "api_bank__QueryBalance" in result.output


def test_export_formats(registry_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "g.graphml"
    run("graph", "export", "--format", "graphml", "-o", str(out), "--registry", str(registry_dir))
    root = ET.parse(out).getroot()
    ns = {"g": "http://graphml.graphdrawing.org/xmlns"}
    assert len(root.findall(".//g:node", ns)) == 53
    assert len(root.findall(".//g:edge", ns)) >= 21
    doc = json.loads(run("graph", "export", "--format", "json", "--registry", str(registry_dir)).stdout)
    assert {e["origin"] for e in doc["edges"]} == {"inferred", "manifest"}
    html = run(
        "graph",
        "export",
        "--format",
        "html",
        "--tool",
        "QueryBalance",
        "--depth",
        "1",
        "--registry",
        str(registry_dir),
    ).stdout
    assert "<canvas" in html and "api_bank__QueryBalance" in html
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", html)  # self-contained: nothing to fetch
    bad = runner.invoke(app, ["graph", "export", "--format", "svg", "--registry", str(registry_dir)])
    assert bad.exit_code == 1 and "--format" in bad.output


def test_bench_graph_last_line_is_json(dataset_dir: Callable[[str], Path]) -> None:
    dataset_dir("api_bank")
    result = run("bench-graph", "api_bank")
    doc = json.loads(result.stdout.strip().splitlines()[-1])
    assert {
        "precision",
        "recall",
        "f1",
        "per_kind",
        "dataset",
        "tools",
        "gold_edges",
        "predicted_edges",
        "seconds",
    } <= set(doc)
    assert doc["dataset"] == "api_bank" and doc["tools"] == 53 and doc["gold_edges"] == 20
    assert doc["recall"] == 1.0
    assert set(doc["per_kind"]) == {k.value for k in EdgeKind}
    only_json = run("bench-graph", "api_bank", "--json").stdout.strip().splitlines()
    assert len(only_json) == 1 and json.loads(only_json[0])["f1"] == doc["f1"]
