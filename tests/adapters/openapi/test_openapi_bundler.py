"""$ref resolution: recursion -> $defs, shared refs kept once, external files, remote refs refused."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest

from tests.adapters.openapi.openapi_spec_helpers import ok, output_schema
from toolweave.adapters.openapi.loader import SpecLoader
from toolweave.adapters.openapi.parser import parse_spec_file


def _doc(paths: dict[str, Any], schemas: dict[str, Any], version: str = "3.0.3") -> dict[str, Any]:
    return {
        "openapi": version,
        "info": {"title": "t", "version": "1"},
        "paths": paths,
        "components": {"schemas": schemas},
    }


def _body_op(ref: str, op_id: str = "op") -> dict[str, Any]:
    return {
        "post": {
            "operationId": op_id,
            "requestBody": {"content": {"application/json": {"schema": {"$ref": ref}}}},
            "responses": ok({"$ref": ref}),
        }
    }


def test_recursive_schemas_become_defs_refs_without_cycles(write_spec):
    schemas = {
        "Node": {
            "type": "object",
            "properties": {
                "value": {"type": "string"},
                "children": {"type": "array", "items": {"$ref": "#/components/schemas/Node"}},
            },
        },
        "A": {"type": "object", "properties": {"b": {"$ref": "#/components/schemas/B"}}},
        "B": {"type": "object", "properties": {"a": {"$ref": "#/components/schemas/A"}}},
    }
    parsed = parse_spec_file(
        str(
            write_spec(
                _doc(
                    {
                        "/n": _body_op("#/components/schemas/Node"),
                        "/a": _body_op("#/components/schemas/A", "opA"),
                    },
                    schemas,
                )
            )
        ),
        source="s",
    )
    node, a = parsed.tools
    schema = node.input_schema
    assert schema["properties"]["body"] == {"$ref": "#/$defs/Node"}
    assert schema["$defs"]["Node"]["properties"]["children"]["items"] == {"$ref": "#/$defs/Node"}
    json.dumps(schema)  # no Python-level cycle
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    assert validator.is_valid({"body": {"value": "x", "children": [{"value": "y", "children": []}]}})
    assert not validator.is_valid({"body": {"children": [{"value": 3}]}})
    # Mutual recursion: both ends stay definitions.
    assert set(a.input_schema["$defs"]) == {"A", "B"}


def test_shared_refs_are_kept_once_and_single_uses_are_inlined(write_spec):
    big = {"type": "object", "description": "x" * 300, "properties": {"id": {"type": "integer"}}}
    schemas = {
        "Owner": big,
        "Pair": {
            "type": "object",
            "properties": {
                "first": {"$ref": "#/components/schemas/Owner"},
                "second": {"$ref": "#/components/schemas/Owner"},
                "tag": {"$ref": "#/components/schemas/Tag"},
                "meta": {"$ref": "#/components/schemas/Meta"},
            },
        },
        "Tag": {"type": "string", "maxLength": 10},
        "Meta": {"type": "object", "description": "y" * 300, "properties": {"n": {"type": "integer"}}},
    }
    parsed = parse_spec_file(
        str(write_spec(_doc({"/p": _body_op("#/components/schemas/Pair")}, schemas))), source="s"
    )
    schema = parsed.tools[0].input_schema
    body = schema["properties"]["body"]
    assert body["properties"]["first"] == {"$ref": "#/$defs/Owner"}  # used twice: kept once
    assert body["properties"]["tag"] == {"type": "string", "maxLength": 10}  # small: inlined
    assert body["properties"]["meta"]["properties"] == {"n": {"type": "integer"}}  # used once: inlined
    assert set(schema["$defs"]) == {"Owner"}
    jsonschema.Draft202012Validator.check_schema(schema)


def test_each_component_is_converted_once_per_spec(write_spec, monkeypatch):
    from toolweave.adapters.openapi import bundler

    calls: list[str] = []
    original = bundler.SchemaBundler._convert_object

    def counting(self, node, base_uri):
        if node.get("title") == "Shared":
            calls.append("Shared")
        return original(self, node, base_uri)

    monkeypatch.setattr(bundler.SchemaBundler, "_convert_object", counting)
    schemas = {"S": {"title": "Shared", "type": "object", "description": "z" * 400}}
    paths = {f"/p{i}": _body_op("#/components/schemas/S", f"op{i}") for i in range(20)}
    parse_spec_file(str(write_spec(_doc(paths, schemas))), source="s")
    assert calls == ["Shared"]


def test_external_relative_file_refs(write_spec):
    write_spec(
        {"Pet": {"type": "object", "properties": {"tag": {"$ref": "common.yaml#/Tag"}}}},
        name="defs/pets.yaml",
    )
    write_spec({"Tag": {"type": "string", "enum": ["a", "b"]}}, name="defs/common.yaml")
    write_spec({"name": "limit", "in": "query", "schema": {"type": "integer"}}, name="params/limit.json")
    doc = _doc(
        {
            "/pets": {
                "get": {
                    "operationId": "list",
                    "parameters": [{"$ref": "params/limit.json"}],
                    "responses": ok({"$ref": "defs/pets.yaml#/Pet"}),
                }
            }
        },
        {},
    )
    tool = parse_spec_file(str(write_spec(doc)), source="s").tools[0]
    assert tool.input_schema["properties"]["limit"] == {"type": "integer"}
    assert output_schema(tool)["properties"]["tag"] == {"type": "string", "enum": ["a", "b"]}


def test_remote_refs_are_refused_unless_allowed(write_spec):
    doc = _doc(
        {
            "/pets": {
                "get": {"operationId": "list", "responses": ok({"$ref": "https://example.com/pet.json#/Pet"})}
            },
            "/ok": {"get": {"operationId": "fine", "responses": ok()}},
        },
        {},
    )
    path = str(write_spec(doc))
    parsed = parse_spec_file(path, source="s")
    assert [t.name for t in parsed.tools] == ["fine"]
    assert "remote $ref 'https://example.com/pet.json#/Pet' refused" in parsed.problems[0].message
    assert parsed.problems[0].where == "spec.yaml#/paths/~1pets/get"

    fetched: list[str] = []

    def fetch(url: str) -> str:
        fetched.append(url)
        return json.dumps({"Pet": {"type": "object", "properties": {"id": {"type": "integer"}}}})

    parsed = parse_spec_file(path, source="s", loader=SpecLoader(allow_remote_refs=True, fetch=fetch))
    assert fetched == ["https://example.com/pet.json"]
    assert output_schema(parsed.tools[0])["properties"]["id"] == {"type": "integer"}


def test_property_named_ref_is_data_and_31_ref_siblings_are_kept(write_spec):
    schemas = {
        "K8s": {
            "type": "object",
            "properties": {
                "$ref": {"type": "string"},
                "x": {"$ref": "#/components/schemas/Id", "description": "the id"},
            },
        },
        "Id": {"type": "integer", "minimum": 1},
    }
    tool = parse_spec_file(
        str(write_spec(_doc({"/k": _body_op("#/components/schemas/K8s")}, schemas, "3.1.0"))), source="s"
    ).tools[0]
    body = tool.input_schema["properties"]["body"]
    assert body["properties"]["$ref"] == {"type": "string"}
    assert body["properties"]["x"] == {"type": "integer", "minimum": 1, "description": "the id"}
    jsonschema.Draft202012Validator.check_schema(tool.input_schema)


@pytest.mark.parametrize(
    "bad",
    [
        {"type": "text"},
        {"required": True, "type": "string"},
        {"pattern": "\\p{L}+"},
        {"items": [{"type": "string"}]},
        {"$id": "x", "type": "object"},
    ],
)
def test_invalid_json_schema_bits_are_dropped(write_spec, bad):
    doc = _doc(
        {
            "/a": {
                "get": {
                    "operationId": "a",
                    "parameters": [{"name": "q", "in": "query", "schema": bad}],
                    "responses": ok(),
                }
            }
        },
        {},
    )
    schema = parse_spec_file(str(write_spec(doc)), source="s").tools[0].input_schema
    jsonschema.Draft202012Validator.check_schema(schema)
    assert "$id" not in schema["properties"]["q"]
