"""Catalog files: formats, edge-kind normalisation, and bad input named by file and tool."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from toolweave.errors import CatalogError
from toolweave.records import EdgeKind
from toolweave.registry.catalog import load_catalog


def write(path: Path, doc: object) -> Path:
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


TOOLLINKOS = [
    {
        "name": "get_date",
        "description": "Today's date.",
        "parameters": [],
        "func_type": "core",
        "depends_on": [],
    },
    {
        "name": "book",
        "description": "Book a table.",
        "func_type": "regular",
        "parameters": [
            {"name": "day", "type": "string", "description": "When.", "required": True},
            {"name": "people", "type": "int", "description": "How many."},
        ],
        "depends_on": [
            {
                "name": "get_date",
                "dependence_type": "PARAMETER_DEPENDS_ON",
                "parameter_name": "day",
                "reason": "r",
            },
            {"name": "get_date", "dependence_type": "TOOL INDIRECTLY_DEPENDS_ON", "reason": "s"},
        ],
    },
]


def test_toollinkos_tools_schema_kind_and_normalised_edges(tmp_path: Path) -> None:
    cat = load_catalog([write(tmp_path / "tools.json", TOOLLINKOS)], "tl")
    book = cat.by_name()["book"]
    assert book.id == "tl__book" and book.kind == "regular" and cat.by_name()["get_date"].kind == "core"
    assert book.input_schema == {
        "type": "object",
        "properties": {
            "day": {"type": "string", "description": "When."},
            "people": {"type": "integer", "description": "How many."},
        },
        "required": ["day"],
    }
    assert [(e.tool, e.depends_on, e.kind, e.parameter_name) for e in cat.edges] == [
        ("tl__book", "tl__get_date", EdgeKind.PARAMETER_DIRECTLY_DEPENDS_ON, "day"),
        ("tl__book", "tl__get_date", EdgeKind.TOOL_INDIRECTLY_DEPENDS_ON, None),
    ]


def test_mcp_tools_list_result(tmp_path: Path) -> None:
    doc = {
        "tools": [
            {"name": "echo", "description": "Echo.", "inputSchema": {"type": "object"}, "title": "Echo"}
        ]
    }
    cat = load_catalog([write(tmp_path / "list.json", doc)], "srv")
    assert [(t.id, t.title, t.input_schema) for t in cat.tools] == [("srv__echo", "Echo", {"type": "object"})]


def test_normalized_jsonl_skips_query_derived_edges_and_says_so(tmp_path: Path) -> None:
    rows = [
        {"name": "Token", "description": "Get a token.", "parameters": None, "depends_on": []},
        {
            "name": "Add",
            "description": "Add.",
            "parameters": {"type": "object", "properties": {"token": {"type": "string"}}},
            "depends_on": ["Token"],
            "depends_on_detail": [
                {"tool": "Token", "type": "param", "param": "token", "evidence": "schema: token"},
                {"tool": "Token", "type": "param", "param": "x", "evidence": "dialogues: value seen"},
            ],
        },
    ]
    path = tmp_path / "tools.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows), encoding="utf-8")
    cat = load_catalog([tmp_path], "ab")
    assert [(e.kind, e.parameter_name) for e in cat.edges] == [
        (EdgeKind.PARAMETER_DIRECTLY_DEPENDS_ON, "token")
    ]
    assert len(cat.skipped_edges) == 1 and "query-derived" in cat.skipped_edges[0]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("[{", "malformed JSON at line 1"),
        (json.dumps([{"name": "a", "description": ""}]), "tool 'a': empty description"),
        (
            json.dumps([{"name": "a", "description": "d", "depends_on": [{"name": "zz"}]}]),
            "tool 'a': depends_on",
        ),
        (
            json.dumps(
                [{"name": "a", "description": "d", "depends_on": [{"name": "b", "dependence_type": "X"}]}]
            ),
            "unknown edge kind 'X'",
        ),
        (
            json.dumps(
                [
                    {
                        "name": "a",
                        "description": "d",
                        "depends_on": [{"name": "b", "dependence_type": "TOOL_DIRECTLY_DEPENDS_ON"}],
                    }
                ]
            ),
            "depends on 'b', which this catalog does not hold",
        ),
        (json.dumps({"weird": 1}), "not a catalog"),
        (json.dumps([{"description": "no name"}]), "item 0: tool has no name"),
    ],
)
def test_bad_catalogs_name_file_and_tool(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(CatalogError) as err:
        load_catalog([path], "s")
    assert str(path) in str(err.value) and message in str(err.value)


def test_real_toollinkos_folder_loads_every_tool_and_edge(dataset_dir) -> None:
    path = dataset_dir("toollinkos")
    raw = json.loads((path / "core_tools.json").read_text()) + json.loads(
        (path / "regular_tools.json").read_text()
    )
    cat = load_catalog([path], "toollinkos")
    assert len(cat.tools) == len(raw) == 573
    assert len(cat.edges) == sum(len(t["depends_on"]) for t in raw)  # nothing dropped, all spellings parsed
