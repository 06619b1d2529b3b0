"""The quick check of plain schemas never says "valid" where jsonschema finds an error, and does say it
for the usual valid calls (else it would save nothing)."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from toolweave.adapters.plain_schema import quick_check

TIME = {
    "type": "object",
    "properties": {
        "timezone": {"type": "string", "title": "Timezone"},
        "datetime": {"type": "string"},
        "day_of_week": {"type": "string"},
        "is_dst": {"type": "boolean"},
    },
    "required": ["timezone", "datetime", "day_of_week", "is_dst"],
    "title": "TimeResult",
}
NESTED = {
    "type": "object",
    "properties": {
        "ids": {"type": "array", "items": {"type": "integer"}},
        "owner": {
            "type": "object",
            "properties": {"name": {"type": "string"}, "age": {"type": ["integer", "null"]}},
            "required": ["name"],
            "additionalProperties": False,
        },
        "score": {"type": "number", "description": "0 to 1", "default": 0.5, "examples": [0.1]},
    },
    "additionalProperties": {"type": "string"},
}
PLAIN = [TIME, NESTED, {"type": "object"}, {}, True, {"type": "array"}, {"type": ["string", "number"]}]

VALUES: list[Any] = [
    None, True, False, 0, 1, -3, 1.0, 2.5, "", "x", "Europe/Paris", [], [1, 2], [1, "a"], [1.0], {},
    {"name": "n"}, {"name": 3}, {"name": "n", "age": None}, {"name": "n", "age": True}, {"name": "n", "x": 1},
    (1, 2),
]  # fmt: skip


def instances() -> list[Any]:
    """Scalars, and objects made of them under the plain schemas' field names."""
    out = list(VALUES)
    good_time = {"timezone": "UTC", "datetime": "2026-11-29T07:00", "day_of_week": "Sunday", "is_dst": False}
    out.append(good_time)
    for field, value in itertools.product(good_time, VALUES):
        out.append({**good_time, field: value})
        out.append({k: v for k, v in good_time.items() if k != field})
    for field, value in itertools.product(["ids", "owner", "score", "extra"], VALUES):
        out.append({field: value})
        out.append({"ids": [1], "owner": {"name": "a"}, field: value})
    return out


@pytest.mark.parametrize("schema", PLAIN, ids=range(len(PLAIN)))
def test_the_quick_check_says_valid_only_where_jsonschema_finds_no_error(schema: Any) -> None:
    check = quick_check(schema)
    assert check is not None
    validator = Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)
    passed = 0
    for instance in instances():
        if check(instance):
            passed += 1
            assert validator.is_valid(instance), (schema, instance)
    assert passed > 0


def test_the_usual_valid_results_and_arguments_pass_it() -> None:
    time_check, nested_check = quick_check(TIME), quick_check(NESTED)
    assert time_check is not None and nested_check is not None
    assert time_check({"timezone": "UTC", "datetime": "2026", "day_of_week": "Sunday", "is_dst": False})
    assert nested_check({"ids": [1, 2], "owner": {"name": "a", "age": None}, "score": 1, "note": "x"})
    assert not time_check({"timezone": "UTC"})  # a missing field: jsonschema says what is wrong
    assert not nested_check({"owner": {"name": "a", "city": "x"}})  # not allowed by additionalProperties


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "string", "format": "date"},  # formats are checked by jsonschema's format checker
        {"type": "string", "enum": ["a"]},
        {"type": "object", "properties": {"a": {"$ref": "#/$defs/a"}}, "$defs": {"a": {"type": "string"}}},
        {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object"},
        {"type": "strin"},  # an invalid schema is jsonschema's to report
        {"type": "object", "required": "a"},
        {"type": "object", "properties": {"a": False}},
        {"type": "array", "items": [{"type": "string"}]},
        {"type": "integer", "minimum": 0},
        {"title": 3},
        {"type": ["string", "string"]},
        False,
        [],
    ],
)
def test_schemas_with_anything_else_get_no_quick_check(schema: Any) -> None:
    assert quick_check(schema) is None
