"""Manifest corrections: add, remove, pin; declared beats inferred; pinned edges survive everything."""

from __future__ import annotations

import pytest

from toolweave.errors import ConfigError
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
    return DependencyEdge(tool=a, depends_on=b, kind=kind, origin=origin, parameter_name=param)  # type: ignore[arg-type]


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
    graph: DependencyGraph,
) -> None:
    graph.add_edge(edge("a", "b", "declared"))
    graph.add_edge(edge("a", "c"))
    graph.add_edge(edge("b", "c"))
    ov = GraphOverrides.from_mapping(
        {"remove": [{"tool": "a", "depends_on": "b"}, {"tool": "a", "depends_on": "c"}]}, where="m.yaml:graph"
    )
    report = apply_overrides(graph, ov)
    assert report.removed == 2
    assert [(e.tool, e.depends_on) for e in graph.edges()] == [("b", "c")]
    assert merge_inferred(graph, [edge("a", "c")], ov) == 0


def test_remove_can_target_one_kind_only(graph: DependencyGraph) -> None:
    graph.add_edge(edge("a", "b", "declared", EdgeKind.PARAMETER_DIRECTLY_DEPENDS_ON, "p"))
    graph.add_edge(edge("a", "b", "declared", T))
    ov = GraphOverrides.from_mapping(
        {"remove": [{"tool": "a", "depends_on": "b", "kind": "TOOL DIRECTLY_DEPENDS_ON"}]}
    )
    apply_overrides(graph, ov)
    assert [e.kind for e in graph.dependencies("a")] == [EdgeKind.PARAMETER_DIRECTLY_DEPENDS_ON]


def test_pinned_edges_survive_removes_and_refreshes(graph: DependencyGraph) -> None:
    ov = GraphOverrides.from_mapping(
        {
            "pin": [{"tool": "a", "depends_on": "d", "reason": "the ops team says so"}],
            "remove": [{"tool": "a", "depends_on": "d"}],
            "add": [
                {"tool": "b", "depends_on": "c", "kind": "PARAMETER_DIRECTLY_DEPENDS_ON", "parameter": "cid"}
            ],
        }
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


def test_unknown_tools_are_reported_not_dropped_silently(graph: DependencyGraph) -> None:
    ov = GraphOverrides.from_mapping({"add": [{"tool": "a", "depends_on": "zz"}]}, where="gw.yaml:graph")
    report = apply_overrides(graph, ov)
    assert report.added == 0
    assert report.problems and "zz" in report.problems[0] and "gw.yaml:graph.add[0]" in report.problems[0]


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ({"add": [{"tool": "a"}]}, "m:graph.add[0].depends_on"),
        ({"pin": [{"tool": "a", "depends_on": "b", "kind": "SOMETIMES"}]}, "m:graph.pin[0].kind"),
        ({"drop": []}, "unknown key"),
        ({"remove": {"tool": "a"}}, "m:graph.remove: expected a list"),
    ],
)
def test_bad_entries_name_the_field(doc: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("]", r"\]")):
        GraphOverrides.from_mapping(doc, where="m:graph")


def test_manifest_edges_convention_and_kind_default(graph: DependencyGraph) -> None:
    ov = GraphOverrides.from_mapping({"add": [{"tool": "a", "depends_on": "b", "parameter": "p"}]})
    assert ov.add[0].kind == EdgeKind.PARAMETER_DIRECTLY_DEPENDS_ON and ov.add[0].evidence == "manifest:add"
    pin = DependencyEdge(tool="c", depends_on="d", kind=T, origin="manifest", evidence="manifest:pin")
    plain = DependencyEdge(tool="a", depends_on="b", kind=T, origin="manifest", evidence="manifest:add")
    from_manifest = GraphOverrides.from_edges([pin, plain], [EdgeSelector("c", "d")])
    assert from_manifest.pin == [pin] and from_manifest.add == [plain]
    apply_overrides(graph, from_manifest)
    assert [(e.tool, e.depends_on) for e in graph.edges()] == [("a", "b"), ("c", "d")]
