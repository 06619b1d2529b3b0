"""Shared records: edge-kind spellings, tool ids, content hashes."""

from __future__ import annotations

import pytest

from toolweave.records import MAX_TOOL_ID_LENGTH, EdgeKind, ToolRecord, make_tool_id


@pytest.mark.parametrize(
    ("raw", "kind"),
    [
        ("TOOL_DIRECTLY_DEPENDS_ON", EdgeKind.TOOL_DIRECTLY_DEPENDS_ON),
        ("TOOL INDIRECTLY_DEPENDS_ON", EdgeKind.TOOL_INDIRECTLY_DEPENDS_ON),
        ("parameter directly depends on", EdgeKind.PARAMETER_DIRECTLY_DEPENDS_ON),
        ("PARAMETER_DEPENDS_ON", EdgeKind.PARAMETER_DIRECTLY_DEPENDS_ON),
        (" PARAMETER_INDIRECTLY_DEPENDS_ON ", EdgeKind.PARAMETER_INDIRECTLY_DEPENDS_ON),
    ],
)
def test_edge_kind_spellings_are_normalised(raw: str, kind: EdgeKind) -> None:
    assert EdgeKind.parse(raw) is kind


def test_unknown_edge_kind_names_the_accepted_ones() -> None:
    with pytest.raises(ValueError, match="TOOL_DIRECTLY_DEPENDS_ON"):
        EdgeKind.parse("SOMETIMES_NEEDS")


def test_tool_ids_are_prefixed_sanitised_and_bounded() -> None:
    assert make_tool_id("time", "get_current_time") == "time__get_current_time"
    assert make_tool_id("my server", "do.thing/now") == "my_server__do_thing_now"
    long = make_tool_id("github", "x" * 100)
    assert len(long) <= MAX_TOOL_ID_LENGTH
    assert long == make_tool_id("github", "x" * 100)  # deterministic
    assert long != make_tool_id("github", "x" * 99 + "y")


def test_colliding_sanitised_names_get_distinct_stable_ids() -> None:
    first = make_tool_id("s", "a.b")
    second = make_tool_id("s", "a/b", taken={first})
    assert first == "s__a_b" and second != first and second.startswith("s__a_b_")
    assert second == make_tool_id("s", "a/b", taken={first})


def test_content_hash_follows_content_not_id() -> None:
    tool = ToolRecord(id="s__t", source="s", name="t", description="does t")
    assert tool.content_hash == tool.model_copy(update={"id": "other"}).content_hash
    assert tool.content_hash != tool.model_copy(update={"description": "does u"}).content_hash
    assert tool.content_hash != tool.model_copy(update={"examples": ("use t",)}).content_hash


def test_annotations_come_from_the_backend_and_reach_the_published_tool() -> None:
    from toolweave.server.turns.meta_tools import to_mcp_tool

    plain = ToolRecord(id="s__a", source="s", name="a")
    assert (plain.annotations, plain.read_only, plain.destructive) == ({}, False, False)
    assert to_mcp_tool(plain).annotations is None
    ann = {"read_only_hint": False, "destructive_hint": True}
    record = ToolRecord(id="s__b", source="s", name="b", backend={"tool": "b", "annotations": ann})
    assert (record.read_only, record.destructive) == (False, True)
    published = to_mcp_tool(record).annotations
    assert published is not None and published.destructive_hint is True and published.read_only_hint is False
