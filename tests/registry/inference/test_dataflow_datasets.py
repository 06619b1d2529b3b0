"""The data-flow rule and the calibration on the gold graphs of ../shared/datasets (skipped without
them), and on the demo fleet's real schemas (mcp-server-time, mcp-server-git, server-memory).

Floors sit below what bench/inference.py measures (bench/HISTORY.md), so a rule that breaks shows up
without the tests being tuned to today's exact figures.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from toolweave.inference import infer_edges, score_edges
from toolweave.inference.calibration import NO_EVIDENCE, RULE_CONFIDENCE, shipped
from toolweave.records import ToolRecord

DEMO = Path(__file__).with_name("demo_fleet.json")


def demo_fleet() -> list[ToolRecord]:
    """The tools/list answers of the demo manifest's three servers (``manifests/demo.yaml``)."""
    doc = json.loads(DEMO.read_text(encoding="utf-8"))
    return [
        ToolRecord(
            id=f"{server}__{t['name']}",
            source=server,
            name=t["name"],
            description=t["description"] or t["name"],
            input_schema=t["inputSchema"],
            output_schema=t.get("outputSchema"),
        )
        for server, tools in doc.items()
        for t in tools
    ]


def test_the_demo_fleet_links_no_server_to_another_through_a_shared_name() -> None:
    edges = infer_edges(demo_fleet())
    servers = {(e.tool.split("__")[0], e.depends_on.split("__")[0]) for e in edges}
    assert ("git", "time") not in servers and ("time", "git") not in servers
    # what it does find is real: deleting entities takes names that reading the graph returns
    names = {(e.tool, e.depends_on): e.parameter_name for e in edges}
    assert names[("memory__delete_entities", "memory__read_graph")] == "entityNames"


@pytest.mark.parametrize("name", ["taskbench_huggingface", "taskbench_multimedia"])
def test_taskbench_media_and_text_flows(name: str, dataset_dir: Callable[[str], Path]) -> None:
    from toolweave.benchmark.gold_graphs import gold_graph

    dataset_dir(name)  # skips without ../shared
    tools, gold = gold_graph(name)
    scores = score_edges(infer_edges(tools), gold)
    assert scores.f1 >= 0.6 and scores.precision >= 0.9


def test_nestful_flows_floor(dataset_dir: Callable[[str], Path]) -> None:
    from toolweave.benchmark.gold_graphs import gold_graph

    dataset_dir("nestful_graph")
    tools, gold = gold_graph("nestful_graph")
    scores = score_edges(infer_edges(tools), gold)
    assert scores.recall >= 0.2 and scores.precision >= 0.2


def test_the_shipped_table_is_what_calibration_gives(dataset_dir: Callable[[str], Path]) -> None:
    """A rule changed without pasting ``python bench/inference.py calibrate --table``'s block fails here."""
    from toolweave.benchmark.gold_graphs import all_rule_counts

    dataset_dir("toollinkos")
    table = shipped(all_rule_counts())
    assert {r: c for r, c in table.items() if c != NO_EVIDENCE} == {
        r: c for r, c in RULE_CONFIDENCE.items() if c != NO_EVIDENCE
    }
