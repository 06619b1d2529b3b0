from __future__ import annotations

import json
from pathlib import Path

import pytest

from toolweave.errors import GraphError
from toolweave.records import DependencyEdge, EdgeKind
from toolweave.registry.graph import GRAPH_FILE, DependencyGraph

P = EdgeKind.PARAMETER_DIRECTLY_DEPENDS_ON


def small() -> DependencyGraph:
    g = DependencyGraph()
    for tool in ("a", "b", "c"):
        g.add_tool(tool, "core" if tool == "c" else "regular", "s")
    g.add_edge(DependencyEdge(tool="a", depends_on="b", kind=P, parameter_name="x", reason="x from b"))
    g.add_edge(DependencyEdge(tool="a", depends_on="b", kind=P, parameter_name="y"))
    g.add_edge(DependencyEdge(tool="b", depends_on="c", kind=EdgeKind.TOOL_INDIRECTLY_DEPENDS_ON))
    return g


def test_parallel_edges_kept_and_directions() -> None:
    g = small()
    assert [e.parameter_name for e in g.dependencies("a")] == ["x", "y"]
    assert [e.tool for e in g.dependents("c")] == ["b"]
    assert g.dependencies("a", kinds=[EdgeKind.TOOL_INDIRECTLY_DEPENDS_ON]) == []
    assert g.kind("c") == "core"


def test_edge_to_unknown_tool_is_reported_not_dropped() -> None:
    g = small()
    with pytest.raises(GraphError, match="unknown tool 'zz'"):
        g.add_edge(DependencyEdge(tool="a", depends_on="zz", kind=P))
    problems = g.add_edges([DependencyEdge(tool="zz", depends_on="a", kind=P)])
    assert len(problems) == 1 and "zz" in str(problems[0])


def test_save_is_atomic_and_round_trips(tmp_path: Path) -> None:
    g = small()
    g.save(tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == [GRAPH_FILE]  # no temp file left behind
    again = DependencyGraph.load(tmp_path)
    assert sorted(e.key for e in again.edges()) == sorted(e.key for e in g.edges())
    assert next(e for e in again.edges() if e.parameter_name == "x").reason == "x from b"


def test_corrupt_graph_file_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / GRAPH_FILE).write_text("{not json")
    with pytest.raises(GraphError, match=GRAPH_FILE):
        DependencyGraph.load(tmp_path)
    (tmp_path / GRAPH_FILE).write_text(json.dumps({"format": "other"}))
    with pytest.raises(GraphError, match="not a toolweave graph"):
        DependencyGraph.load(tmp_path)


def test_edges_touching_some_tools_are_those_with_an_end_among_them() -> None:
    g = small()
    g.add_tool("d", "regular", "s")
    g.add_edge(DependencyEdge(tool="d", depends_on="c", kind=P, parameter_name="z"))
    assert sorted((e.tool, e.depends_on, e.parameter_name) for e in g.edges(touching={"a", "b"})) == [
        ("a", "b", "x"),  # once, though both ends are among them
        ("a", "b", "y"),
        ("b", "c", None),
    ]
    assert {e.parameter_name for e in g.edges(touching={"c"})} == {None, "z"}
    assert list(g.edges(touching={"nobody"})) == []
    assert [e.parameter_name for e in g.between("a", "b")] == ["x", "y"] and g.between("b", "a") == []


def test_a_scoped_removal_removes_what_a_full_one_does_among_those_tools() -> None:
    scoped, full = small(), small()
    assert scoped.remove_edges(lambda e: e.tool == "a", touching={"a"}) == 2
    assert full.remove_edges(lambda e: e.tool == "a") == 2
    assert (
        list(scoped.edges())
        == list(full.edges())
        == [DependencyEdge(tool="b", depends_on="c", kind=EdgeKind.TOOL_INDIRECTLY_DEPENDS_ON)]
    )


def test_the_graph_says_whose_outgoing_edges_changed() -> None:
    g = small()
    assert g.take_changed() is None  # never asked: everything is new
    assert g.take_changed() == set()
    g.add_edge(DependencyEdge(tool="c", depends_on="a", kind=P, parameter_name="w"))
    g.remove_edges(lambda e: e.parameter_name == "x", touching={"a"})
    assert g.take_changed() == {"a", "c"}
    g.remove_tools(["c"])  # b loses its edge to c
    assert g.take_changed() == {"b", "c"}
    g.remove_edges(lambda e: False)
    assert g.take_changed() == set()


def test_the_graph_keeps_which_tools_declare_edges() -> None:
    g = small()
    assert g.declaring() == {"a", "b"}  # small()'s edges have the default origin, "declared"
    g.add_edge(DependencyEdge(tool="c", depends_on="a", kind=P, origin="inferred"))
    assert g.declaring() == {"a", "b"}
    g.remove_edges(lambda e: e.parameter_name == "x", touching={"a"})
    assert g.declaring() == {"a", "b"}  # a still declares y
    g.remove_edges(lambda e: e.tool == "a", touching={"a"})
    assert g.declaring() == {"b"}
    g.remove_tools(["c"])  # b's declared edge goes with c
    assert g.declaring() == set()


def test_a_declared_edge_replaced_by_a_pin_of_the_same_key_no_longer_declares() -> None:
    """A manifest pin of the edge a source declares replaces it (same key): its source then declares
    nothing, and inference may serve it again, as for a registry opened afresh."""
    g = small()
    g.remove_edges(lambda e: e.tool == "b", touching={"b"})
    assert g.declaring() == {"a"}
    for parameter in ("x", "y"):
        g.add_edge(
            DependencyEdge(tool="a", depends_on="b", kind=P, parameter_name=parameter, origin="manifest")
        )
    assert g.declaring() == set()


def test_inferred_dependents_are_the_other_tools_whose_inferred_edges_lead_there() -> None:
    g = small()
    g.add_tool("d", "regular", "s")
    g.add_edge(DependencyEdge(tool="d", depends_on="b", kind=P, origin="inferred"))
    g.add_edge(DependencyEdge(tool="c", depends_on="b", kind=P, origin="inferred"))
    assert g.inferred_dependents({"b"}) == {"c", "d"}  # a's edge to b is declared
    assert g.inferred_dependents({"b", "c"}) == {"d"}
