"""Foreign exceptions (pydantic, KeyError, ValueError) met while decoding stored or hand-edited data are
mapped once into the ``ToolweaveError`` tree, with what was being read: one test per mapped path."""

from __future__ import annotations

import json
from pathlib import Path

import lancedb
import numpy as np
import pytest

from toolweave.errors import CatalogError, GraphError, RegistryError
from toolweave.records import DependencyEdge, EdgeKind, ToolRecord, make_tool_id
from toolweave.registry.database import EDGE_TABLE, RegistryDatabase
from toolweave.registry.graph import GRAPH_FILE, DependencyGraph
from toolweave.registry.store import StoredTool, ToolTable

GRAPH_FORMAT = "toolweave-graph/1"


def test_an_id_that_cannot_be_made_unique_is_a_catalog_error() -> None:
    taken: set[str] = set()
    for _ in range(5):  # the plain id, then four hash widths
        taken.add(make_tool_id("src", "same", taken))
    with pytest.raises(CatalogError, match="cannot make a unique id for tool 'same' of 'src'"):
        make_tool_id("src", "same", taken)


@pytest.mark.parametrize(
    ("doc", "needle"),
    [
        ({"format": GRAPH_FORMAT, "nodes": [{"kind": "core"}]}, "KeyError('id')"),  # a node without its id
        ({"format": GRAPH_FORMAT, "nodes": [{"id": "a"}], "edges": [{"tool": "a"}]}, "validation error"),
        ({"format": GRAPH_FORMAT, "nodes": "a,b"}, "malformed dependency graph"),  # nodes not a list
    ],
)  # fmt: skip
def test_a_malformed_graph_document_is_a_graph_error(doc: dict[str, object], needle: str) -> None:
    with pytest.raises(GraphError, match="malformed dependency graph") as raised:
        DependencyGraph.from_json(doc, where="graph.json")
    assert needle in str(raised.value)


def test_a_graph_file_that_is_not_an_object_is_a_graph_error(tmp_path: Path) -> None:
    (tmp_path / GRAPH_FILE).write_text(json.dumps(["not", "a", "graph"]))
    with pytest.raises(GraphError, match="a JSON list, not an object"):
        DependencyGraph.load(tmp_path)


def test_a_stored_tool_record_that_does_not_decode_is_a_registry_error(tmp_path: Path) -> None:
    db = lancedb.connect(str(tmp_path))
    table = ToolTable(db, "tools", 4)
    record = ToolRecord(id="s__t", source="s", name="t", description="a tool")
    table.upsert([StoredTool(record, record.content_hash, np.ones(4, dtype=np.float32) / 2)], ["a tool"])
    assert [r.record.id for r in table.load_all()] == ["s__t"]
    db.open_table("tools").update(values={"record": json.dumps({"id": "s__t"})})  # damaged on disk
    with pytest.raises(RegistryError, match="tool table tools: a stored tool record does not decode"):
        ToolTable(db, "tools", 4).load_all()


@pytest.mark.filterwarnings("ignore:Pydantic serializer warnings")
def test_a_stored_edge_that_does_not_decode_is_a_registry_error(tmp_path: Path) -> None:
    database = RegistryDatabase.open(tmp_path)
    assert database.lock.try_acquire()  # a writer
    database.create("test-model", 4)
    edge = DependencyEdge(tool="s__a", depends_on="s__b", kind=EdgeKind.TOOL_DIRECTLY_DEPENDS_ON)
    database.side.save_edges([edge])
    assert database.side.load_edges() == [edge]
    # as another version of toolweave could have written it: a kind this one does not know
    unknown = DependencyEdge.model_construct(**{**edge.model_dump(), "kind": "NEEDS_BADLY"})
    database.side.save_edges([unknown])
    with pytest.raises(RegistryError, match=f"{EDGE_TABLE}: a stored dependency edge does not decode"):
        database.side.load_edges()
