"""The ``find_tools`` answer (``server/turns/meta_tools.py``): published tools with what a call needs, the
others named in one line each; ``detail`` gives every tool whole."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from tests.server.helpers import notes_tools, time_tools
from toolweave.records import EdgeKind
from toolweave.retrieval.results import RankedTool
from toolweave.server.turns.meta_tools import SUMMARY_CHARS, FoundTool, find_tools_result, untitled_schema

CLOCK, CONVERT, CREATE, SEARCH, DELETE = [*time_tools(), *notes_tools()]
LONG = SEARCH.model_copy(update={"description": "Search saved notes. " + "x" * 200 + "\nsecond line"})
FOUND = [
    FoundTool(CONVERT, RankedTool(CONVERT.id, 1, "first_pass", 2.5)),
    FoundTool(
        CLOCK,
        RankedTool(
            CLOCK.id,
            2,
            "dependency",
            0.0,
            via=CONVERT.id,
            edge_kind=EdgeKind.PARAMETER_DIRECTLY_DEPENDS_ON,
            parameter_name="time",
            depth=1,
        ),
    ),
    FoundTool(CREATE, RankedTool(CREATE.id, 3, "first_pass", -0.4, publish=False)),
    FoundTool(LONG, RankedTool(LONG.id, 4, "first_pass", -0.9, publish=False)),
]
PUBLISHED = [CONVERT.id, CLOCK.id]


def answer(**flags: Any) -> dict[str, Any]:
    result = find_tools_result(
        "convert 9:00 in Paris to Tokyo", FOUND, list_changed=True, published=PUBLISHED, **flags
    )
    assert result.structured_content is not None
    return result.structured_content


def test_published_tools_carry_what_a_call_needs_and_the_others_one_line() -> None:
    doc = answer()
    assert [t["name"] for t in doc["tools"]] == [CONVERT.id, CLOCK.id]
    convert, clock = doc["tools"]
    assert convert == {  # a search hit needs no word on why
        "name": CONVERT.id,
        "description": CONVERT.description,
        "input_schema": CONVERT.input_schema,
    }  # no published flag (all of them are) and no query echo: the model knows what it asked
    assert clock["why"] == f"feeds {CONVERT.id}.time" and clock["input_schema"] == CLOCK.input_schema
    assert doc["also_found"] == {
        CREATE.id: CREATE.description,
        LONG.id: "Search saved notes. " + "x" * (SUMMARY_CHARS - 21) + "…",
    }
    assert len(doc["also_found"][LONG.id]) == SUMMARY_CHARS
    assert "how_to_call" not in doc and doc["tool_list_changed"] is True  # the tool descriptions say it
    assert "query" not in doc


def test_without_candidates_left_over_the_answer_says_nothing_more() -> None:
    result = find_tools_result("q", FOUND[:2], list_changed=False, published=PUBLISHED)
    assert result.structured_content is not None
    assert set(result.structured_content) == {"tools", "tool_list_changed"}


def test_detail_gives_every_tool_whole() -> None:
    doc = answer(detail=True)
    assert "also_found" not in doc and doc["query"] == "convert 9:00 in Paris to Tokyo"
    assert [(t["name"], t["published"], t["rank"]) for t in doc["tools"]] == [
        (CONVERT.id, True, 1),
        (CLOCK.id, True, 2),
        (CREATE.id, False, 3),
        (LONG.id, False, 4),
    ]
    assert all(t["input_schema"] and t["source"] and t["reason"] for t in doc["tools"])
    assert doc["tools"][3]["description"] == LONG.description


def test_names_are_the_published_names() -> None:
    result = find_tools_result("q", FOUND, list_changed=False, published=PUBLISHED, name_of=str.upper)
    doc = result.structured_content
    assert doc is not None
    assert [t["name"] for t in doc["tools"]] == [CONVERT.id.upper(), CLOCK.id.upper()]
    assert doc["tools"][1]["why"] == f"feeds {CONVERT.id.upper()}.time"
    assert set(doc["also_found"]) == {CREATE.id.upper(), LONG.id.upper()}


def test_titles_go_but_a_property_named_title_stays() -> None:
    schema = {
        "title": "create_noteArguments",
        "type": "object",
        "properties": {
            "title": {"title": "Title", "type": "string"},
            "tags": {"type": "array", "items": {"title": "Tag", "type": "string"}},
            "when": {"anyOf": [{"type": "string", "title": "Date"}, {"type": "null"}], "default": None},
            "meta": {"type": "object", "additionalProperties": {"title": "Value", "type": "string"}},
        },
        "$defs": {"Note": {"title": "Note", "type": "object", "properties": {"title": {"type": "string"}}}},
        "examples": [{"title": "kept: an example is data"}],
        "required": ["title"],
    }
    assert untitled_schema(schema) == {
        "type": "object",
        "properties": {
            "title": {"type": "string"},
            "tags": {"type": "array", "items": {"type": "string"}},
            "when": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None},
            "meta": {"type": "object", "additionalProperties": {"type": "string"}},
        },
        "$defs": {"Note": {"type": "object", "properties": {"title": {"type": "string"}}}},
        "examples": [{"title": "kept: an example is data"}],
        "required": ["title"],
    }


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_through_the_gateway_detail_gives_every_schema(registry: Any, mode: str) -> None:
    """A client that re-listed (its list holds the published tools) still gets their schemas: its next
    request may lack them; ``detail`` gives every tool's."""
    from mcp import Client

    from tests.e2e.watch import Relister, relisting
    from tests.server.helpers import NOTE_EDGE, FakeBackend
    from tests.server.test_gateway import make_gateway

    clock, notes = FakeBackend("clock", time_tools()), FakeBackend("notes", notes_tools(), [NOTE_EDGE])
    gateway = make_gateway(registry, clock, notes, relist_wait_ms=5000, relist_probe_ms=5000)
    relister = Relister()
    async with Client(gateway.server, mode=mode, message_handler=relister.on_message) as client:
        with anyio.fail_after(20):
            await clock.reported.wait()
            await notes.reported.wait()
        async with relisting(client, relister):
            found = await client.call_tool("find_tools", {"query": "what time is it in Tokyo", "k": 3})
            again = await client.call_tool(
                "find_tools", {"query": "what time is it in Tokyo", "detail": True}
            )
    doc, detailed = found.structured_content, again.structured_content
    assert doc is not None and detailed is not None and relister.lists
    published = doc["tools"]  # every one of them published
    assert published and all("input_schema" in t for t in published), doc
    assert all(t["name"] in relister.lists[-1] for t in published)
    assert len(detailed["tools"]) >= len(doc["tools"]) + len(doc.get("also_found", {}))
    assert all("input_schema" in t and "rank" in t for t in detailed["tools"])
