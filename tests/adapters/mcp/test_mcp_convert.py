"""Pure conversions: upstream tools → records, upstream results → what the gateway returns."""

from __future__ import annotations

import mcp_types as types

from toolweave.adapters.mcp import tools_to_records
from toolweave.call_errors import finish_result
from toolweave.records import MAX_TOOL_ID_LENGTH


def tool(name: str, **kw: object) -> types.Tool:
    return types.Tool(
        name=name, input_schema={"type": "object", "properties": {"q": {"type": "string"}}}, **kw
    )


def test_records_keep_upstream_names_schemas_and_annotations() -> None:
    upstream = [
        tool(
            "search",
            title="Search",
            description="Find things.",
            output_schema={"type": "object", "properties": {"hits": {"type": "array"}}},
            annotations=types.ToolAnnotations(
                read_only_hint=True, open_world_hint=True, destructive_hint=False
            ),
        ),
        tool("get.item", annotations=types.ToolAnnotations(title="Get an item")),
    ]
    recs = {r.name: r for r in tools_to_records("web", upstream)}
    search, get = recs["search"], recs["get.item"]
    assert search.id == "web__search" and search.source == "web"
    assert search.title == "Search" and search.description == "Find things."
    assert search.input_schema == {"type": "object", "properties": {"q": {"type": "string"}}}
    assert search.output_schema == {"type": "object", "properties": {"hits": {"type": "array"}}}
    assert search.tags == ("read-only", "open-world")
    assert search.backend == {
        "tool": "search",
        "annotations": {"read_only_hint": True, "destructive_hint": False, "open_world_hint": True},
    }
    # The published id is sanitised; calls still use the upstream's own name.
    assert get.id == "web__get_item" and get.backend["tool"] == "get.item" and get.title == "Get an item"


def test_ids_are_deterministic_short_and_unique_whatever_the_order() -> None:
    long_name = "x" * 100
    upstream = [tool("a.b"), tool("a_b"), tool(long_name)]
    first = {r.name: r.id for r in tools_to_records("src", upstream)}
    again = {r.name: r.id for r in tools_to_records("src", list(reversed(upstream)))}
    assert first == again
    assert len(set(first.values())) == 3
    assert all(len(i) <= MAX_TOOL_ID_LENGTH for i in first.values())
    assert first[long_name].startswith("src__xxx")


def test_finish_strips_server_info_and_keeps_other_meta() -> None:
    result = types.CallToolResult(
        content=[types.TextContent(text="ok")],
        _meta={"io.modelcontextprotocol/serverInfo": {"name": "up"}, "trace": "t1"},
    )
    out = finish_result(result, 1_000)
    assert out.meta == {"trace": "t1"}
    only = types.CallToolResult(content=[], _meta={"io.modelcontextprotocol/serverInfo": {"name": "up"}})
    assert finish_result(only, 1_000).meta is None


def test_finish_truncates_text_with_a_note_of_the_full_size() -> None:
    image = types.ImageContent(data="aGk=", mime_type="image/png")
    result = types.CallToolResult(
        content=[types.TextContent(text="a" * 600), image, types.TextContent(text="b" * 600)],
        structured_content={"blob": "c" * 2_000},
    )
    out = finish_result(result, 1_000)
    texts = [c.text for c in out.content if isinstance(c, types.TextContent)]
    assert texts[0] == "a" * 600 and texts[1] == "b" * 400
    assert "truncated to 1,000 of 1,200 characters (max_result_chars)" in texts[-1]
    assert "structured content of" in texts[-1] and out.structured_content is None
    assert image in out.content
    small = types.CallToolResult(content=[types.TextContent(text="fine")])
    assert finish_result(small, 1_000) is small
