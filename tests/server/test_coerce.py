"""``coerce.loosely_typed``: which loosely written values are read as the schema types them, and which
are left for the validator to refuse."""

from __future__ import annotations

from typing import Any

import pytest

from toolweave.server.calls.coerce import loosely_typed

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "id": {"type": "integer"},
        "ratio": {"type": "number"},
        "flag": {"type": "boolean"},
        "name": {"type": "string"},
        "maybe": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
        "either": {"type": ["integer", "string"]},
        "many": {"type": "array", "items": {"type": "integer"}},
        "model": {"$ref": "#/$defs/Model"},
        "wrapped": {"allOf": [{"$ref": "#/$defs/Model"}], "description": "pydantic v1's shape"},
        "nullable": {"type": "integer", "nullable": True},
        "free": {},
    },
    "required": ["id"],
    "additionalProperties": {"type": "integer"},
    "$defs": {"Model": {"type": "object", "properties": {"level": {"type": "integer"}}}},
}


@pytest.mark.parametrize(
    ("sent", "read", "changed"),
    [
        ({"id": "5"}, {"id": 5}, ["id"]),
        ({"id": " -12 "}, {"id": -12}, ["id"]),
        ({"id": 1, "ratio": "2.5"}, {"id": 1, "ratio": 2.5}, ["ratio"]),
        ({"id": 1, "ratio": "3"}, {"id": 1, "ratio": 3}, ["ratio"]),
        ({"id": 1, "flag": "TRUE"}, {"id": 1, "flag": True}, ["flag"]),
        ({"id": 1, "maybe": "4"}, {"id": 1, "maybe": 4}, ["maybe"]),
        ({"id": 1, "many": '["1", 2]'}, {"id": 1, "many": [1, 2]}, ["many", "many[0]"]),
        ({"id": 1, "model": '{"level": "3"}'}, {"id": 1, "model": {"level": 3}}, ["model", "model.level"]),
        ({"id": 1, "wrapped": {"level": "3"}}, {"id": 1, "wrapped": {"level": 3}}, ["wrapped.level"]),
        ({"id": 1, "extra": "9"}, {"id": 1, "extra": 9}, ["extra"]),  # additionalProperties types it
        ({"id": 1, "name": None}, {"id": 1}, ["name"]),  # optional and not nullable: left out
    ],
)
def test_values_the_schema_types_are_read_as_it_types_them(
    sent: dict[str, Any], read: dict[str, Any], changed: list[str]
) -> None:
    assert loosely_typed(SCHEMA, sent) == (read, changed)


@pytest.mark.parametrize(
    "sent",
    [
        {"id": 5, "name": "007"},  # already valid: untouched
        {"id": "ticket_001"},  # no integer in it
        {"id": "1.5"},  # a number, but no integer
        {"id": "1_000"},  # Python's float() would take it; JSON would not
        {"id": ""},
        {"id": 1, "ratio": "nan"},
        {"id": 1, "ratio": "inf"},
        {"id": 1, "flag": "yes"},  # only true and false
        {"id": 1, "either": "7"},  # several types allowed: which one is meant is not ours to say
        {"id": 1, "many": '{"a": 1}'},  # JSON, but no array
        {"id": 1, "many": "[1,"},  # no JSON
        {"id": 1, "maybe": None},  # null allowed
        {"id": 1, "nullable": None},  # OpenAPI 3.0's nullable
        {"id": 1, "free": "5"},  # no type said
        {"id": None},  # required: null is the validator's to refuse
        {"id": 1, "name": 5},  # a number is never made text
    ],
)
def test_what_cannot_be_read_exactly_is_left_as_sent(sent: dict[str, Any]) -> None:
    assert loosely_typed(SCHEMA, sent) is None


def test_schemas_that_are_no_object_or_refer_outside_are_left_alone() -> None:
    assert loosely_typed(True, {"id": "5"}) is None
    outside = {"type": "object", "properties": {"id": {"$ref": "https://example.com/id.json"}}}
    assert loosely_typed(outside, {"id": "5"}) is None
    broken = {"type": "object", "properties": {"id": {"$ref": "#/$defs/Missing"}}}
    assert loosely_typed(broken, {"id": "5"}) is None


def test_a_schema_that_refers_to_itself_ends() -> None:
    loop: dict[str, Any] = {
        "type": "object",
        "properties": {"x": {"$ref": "#/$defs/A"}},
        "$defs": {"A": {"$ref": "#/$defs/B"}, "B": {"$ref": "#/$defs/A"}},
    }
    assert loosely_typed(loop, {"x": "1"}) is None
    tree: dict[str, Any] = {
        "$ref": "#/$defs/Node",
        "$defs": {
            "Node": {
                "type": "object",
                "properties": {"value": {"type": "integer"}, "child": {"$ref": "#/$defs/Node"}},
            }
        },
    }
    deep: dict[str, Any] = {"value": "1"}
    for _ in range(100):
        deep = {"value": "1", "child": deep}
    read = loosely_typed(tree, deep)
    assert read is not None
    mended, changed = read
    assert mended["value"] == 1 and mended["child"]["child"]["value"] == 1
    assert len(changed) < 100  # bounded depth: the deepest levels are left to the validator
