"""Manifest corrections: add, remove, pin; declared beats inferred; pinned edges survive everything."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from toolweave.errors import ConfigError
from toolweave.manifest import graph_overrides, load_manifest
from toolweave.records import DependencyEdge, EdgeKind
from toolweave.registry.graph import DependencyGraph
from toolweave.registry.overrides import (
    EdgeSelector,
    GraphOverrides,
    add_authoritative,
    apply_overrides,
    merge_inferred,
)

T = EdgeKind.TOOL_DIRECTLY_DEPENDS_ON


def edge(
    a: str, b: str, origin: str = "inferred", kind: EdgeKind = T, param: str | None = None
) -> DependencyEdge:
    return DependencyEdge(tool=a, depends_on=b, kind=kind, origin=origin, parameter_name=param)


def from_manifest(tmp_path: Path, dependencies: Any, name: str = "gw.yaml") -> GraphOverrides:
    """A manifest's ``dependencies`` section, read as the gateway reads it (the manifest parser)."""
    path = tmp_path / name
    path.write_text(yaml.safe_dump({"dependencies": dependencies}), encoding="utf-8")
    return graph_overrides(load_manifest(path))


@pytest.fixture
def graph() -> DependencyGraph:
    g = DependencyGraph()
    for n in "abcd":
        g.add_tool(n)
    return g


def test_inferred_never_lands_on_a_declared_pair(graph: DependencyGraph) -> None:
    graph.add_edge(edge("a", "b", "declared"))
    added = merge_inferred(graph, [edge("a", "b", kind=EdgeKind.TOOL_INDIRECTLY_DEPENDS_ON), edge("a", "c")])
    assert added == 1
    assert sorted((e.depends_on, e.origin) for e in graph.dependencies("a")) == [
        ("b", "declared"),
        ("c", "inferred"),
    ]


def test_declared_replaces_inferred_on_the_same_pair(graph: DependencyGraph) -> None:
    graph.add_edge(edge("a", "b"))
    graph.add_edge(edge("a", "c"))
    add_authoritative(graph, [edge("a", "b", "declared", EdgeKind.PARAMETER_DIRECTLY_DEPENDS_ON, "x")])
    got = {(e.depends_on, e.origin) for e in graph.dependencies("a")}
    assert got == {("b", "declared"), ("c", "inferred")}


def test_remove_drops_declared_and_inferred_matches_and_keeps_future_inferred_out(
    tmp_path: Path,
    graph: DependencyGraph,
) -> None:
    graph.add_edge(edge("a", "b", "declared"))
    graph.add_edge(edge("a", "c"))
    graph.add_edge(edge("b", "c"))
    ov = from_manifest(
        tmp_path, {"remove": [{"tool": "a", "depends_on": "b"}, {"tool": "a", "depends_on": "c"}]}
    )
    report = apply_overrides(graph, ov)
    assert report.removed == 2
    assert [(e.tool, e.depends_on) for e in graph.edges()] == [("b", "c")]
    assert merge_inferred(graph, [edge("a", "c")], ov) == 0


def test_remove_can_target_one_kind_only(tmp_path: Path, graph: DependencyGraph) -> None:
    graph.add_edge(edge("a", "b", "declared", EdgeKind.PARAMETER_DIRECTLY_DEPENDS_ON, "p"))
    graph.add_edge(edge("a", "b", "declared", T))
    ov = from_manifest(
        tmp_path, {"remove": [{"tool": "a", "depends_on": "b", "kind": "TOOL DIRECTLY_DEPENDS_ON"}]}
    )
    apply_overrides(graph, ov)
    assert [e.kind for e in graph.dependencies("a")] == [EdgeKind.PARAMETER_DIRECTLY_DEPENDS_ON]


def test_pinned_edges_survive_removes_and_refreshes(tmp_path: Path, graph: DependencyGraph) -> None:
    ov = from_manifest(
        tmp_path,
        {
            "pin": [{"tool": "a", "depends_on": "d", "reason": "the ops team says so"}],
            "remove": [{"tool": "a", "depends_on": "d"}],
            "add": [
                {"tool": "b", "depends_on": "c", "kind": "PARAMETER_DIRECTLY_DEPENDS_ON", "parameter": "cid"}
            ],
        },
    )
    graph.add_edge(edge("a", "d"))  # an inferred edge on the pinned pair goes, the pin stays
    report = apply_overrides(graph, ov)
    assert report.pinned == 1 and report.added == 1
    pinned = graph.dependencies("a")
    assert [(e.depends_on, e.origin, e.reason) for e in pinned] == [("d", "manifest", "the ops team says so")]
    # an inference refresh removes inferred edges only, and re-applying is idempotent
    graph.remove_edges(lambda e: e.origin == "inferred")
    apply_overrides(graph, ov)
    assert [(e.depends_on, e.origin) for e in graph.dependencies("a")] == [("d", "manifest")]
    assert [e.parameter_name for e in graph.dependencies("b")] == ["cid"]


def test_unknown_tools_are_reported_not_dropped_silently(tmp_path: Path, graph: DependencyGraph) -> None:
    ov = from_manifest(
        tmp_path, {"add": [{"tool": "b", "depends_on": "c"}, {"tool": "a", "depends_on": "zz"}]}
    )
    report = apply_overrides(graph, ov)
    assert report.added == 1
    assert (
        report.problems
        and "zz" in report.problems[0]
        and "gw.yaml: dependencies.add[1]" in report.problems[0]
    )


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ({"add": [{"tool": "a"}]}, "m.yaml:3:5: dependencies.add[0].depends_on"),
        (
            {"pin": [{"tool": "a", "depends_on": "b", "kind": "SOMETIMES"}]},
            "m.yaml:4:5: dependencies.pin[0].kind: unknown edge kind",
        ),
        ({"drop": []}, "dependencies.drop: unknown key"),
        ({"remove": {"tool": "a"}}, "dependencies.remove"),
    ],
)
def test_bad_entries_name_the_field(tmp_path: Path, doc: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        from_manifest(tmp_path, doc, name="m.yaml")


def test_manifest_edges_convention_and_kind_default(tmp_path: Path, graph: DependencyGraph) -> None:
    ov = from_manifest(tmp_path, {"add": [{"tool": "a", "depends_on": "b", "parameter": "p"}]})
    assert ov.add[0].kind == EdgeKind.PARAMETER_DIRECTLY_DEPENDS_ON and ov.add[0].evidence == "manifest:add"
    pin = DependencyEdge(tool="c", depends_on="d", kind=T, origin="manifest", evidence="manifest:pin")
    plain = DependencyEdge(tool="a", depends_on="b", kind=T, origin="manifest", evidence="manifest:add")
    from_edges = GraphOverrides.from_edges([pin, plain], [EdgeSelector("c", "d")])
    assert from_edges.pin == [pin] and from_edges.add == [plain]
    apply_overrides(graph, from_edges)
    assert [(e.tool, e.depends_on) for e in graph.edges()] == [("a", "b"), ("c", "d")]
