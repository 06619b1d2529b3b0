"""Spec -> tools: names, descriptions, merged parameters, bodies, dialect fixes, problems."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest

from tests.adapters.openapi.openapi_spec_helpers import ok, output_schema, param
from toolweave.adapters.openapi.loader import SpecLoader
from toolweave.adapters.openapi.parser import parse_spec_file
from toolweave.errors import OpenAPISpecError


def _spec(paths: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"openapi": "3.0.3", "info": {"title": "t", "version": "1"}, "paths": paths, **extra}


def _tool(parsed: Any, name: str) -> Any:
    return next(t for t in parsed.tools if t.name == name)


def test_one_tool_per_operation_with_names_descriptions_and_ids(write_spec):
    path = write_spec(
        _spec(
            {
                "/pets": {
                    "get": {
                        "operationId": "list.pets!",
                        "summary": "List pets",
                        "description": "All of them.",
                        "tags": ["pets"],
                        "responses": ok({"type": "array", "items": {"type": "object"}}),
                    },
                    "post": {"summary": "Add", "responses": ok()},
                },
                "/pets/{petId}": {"get": {"operationId": "x" * 80, "responses": ok()}},
                "/other": {"get": {"operationId": "list.pets?", "responses": ok()}},
            }
        )
    )
    parsed = parse_spec_file(str(path), source="shop")
    names = [t.name for t in parsed.tools]
    assert names[0] == "list_pets"
    assert names[1] == "post_pets"  # no operationId: method + path
    assert len(names[2]) <= 64 and names[2].startswith("xxxx")
    assert names[3] == "list_pets_2"  # sanitised alike -> made unique
    assert len(set(names)) == 4
    listed = parsed.tools[0]
    assert listed.id == "shop__list_pets" and listed.source == "shop"
    assert listed.description == "List pets\n\nAll of them.\n\nTags: pets"
    assert listed.backend["operation_id"] == "list.pets!"
    assert all(len(t.id) <= 64 for t in parsed.tools)
    # Array responses are wrapped: MCP output schemas describe objects.
    assert output_schema(listed)["properties"]["result"]["type"] == "array"
    assert listed.backend["output_wrapped"] is True


def test_parameters_merge_path_level_and_operation_level_by_name_and_location(write_spec):
    path = write_spec(
        _spec(
            {
                "/pets/{id}": {
                    "parameters": [
                        param("id", "path", "string", required=True, description="path-level"),
                        param("id", "query", "integer"),
                        param("X-Trace", "header", "string"),
                    ],
                    "get": {
                        "operationId": "getPet",
                        "parameters": [
                            param("id", "path", "integer", required=True, description="op-level wins"),
                            param("session", "cookie", "string"),
                            param("Accept", "header", "string"),
                        ],
                        "responses": ok(),
                    },
                }
            }
        )
    )
    tool = parse_spec_file(str(path), source="s").tools[0]
    props = tool.input_schema["properties"]
    assert props["id"] == {"type": "integer", "description": "op-level wins"}
    assert props["query_id"]["type"] == "integer"  # same name, other location: prefixed, not lost
    assert set(props) == {"id", "query_id", "X-Trace", "session"}  # Accept is ours to set
    assert tool.input_schema["required"] == ["id"]
    by_prop = {p["property"]: p for p in tool.backend["parameters"]}
    assert by_prop["query_id"]["name"] == "id" and by_prop["query_id"]["in"] == "query"
    assert by_prop["session"]["in"] == "cookie"


def test_request_body_goes_under_body_with_content_type(write_spec):
    body_schema = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
    path = write_spec(
        _spec(
            {
                "/pets": {
                    "post": {
                        "operationId": "addPet",
                        "parameters": [{"name": "body", "in": "query", "schema": {"type": "string"}}],
                        "requestBody": {
                            "required": True,
                            "content": {
                                "application/xml": {"schema": {}},
                                "application/json": {"schema": body_schema},
                            },
                        },
                        "responses": ok(code="201"),
                    }
                }
            }
        )
    )
    tool = parse_spec_file(str(path), source="s").tools[0]
    # `body` is reserved for the request body: a parameter of that name is prefixed with its location.
    assert tool.input_schema["properties"]["body"] == body_schema
    assert tool.input_schema["properties"]["query_body"] == {"type": "string"}
    assert tool.input_schema["required"] == ["body"]
    assert tool.backend["body"]["content_type"] == "application/json"
    assert tool.backend["body"]["content_types"] == ["application/xml", "application/json"]
    assert tool.output_schema is None


def test_openapi_30_nullable_and_boolean_exclusive_bounds(write_spec):
    path = write_spec(
        _spec(
            {
                "/a": {
                    "get": {
                        "operationId": "a",
                        "parameters": [
                            {
                                "name": "n",
                                "in": "query",
                                "schema": {
                                    "type": "integer",
                                    "nullable": True,
                                    "maximum": 5,
                                    "exclusiveMaximum": True,
                                    "minimum": 1,
                                    "exclusiveMinimum": False,
                                },
                            },
                            {
                                "name": "e",
                                "in": "query",
                                "schema": {"type": "string", "enum": ["x", "y"], "nullable": True},
                            },
                            {
                                "name": "r",
                                "in": "query",
                                "schema": {"allOf": [{"$ref": "#/components/schemas/Pet"}], "nullable": True},
                            },
                        ],
                        "responses": ok(),
                    }
                }
            },
            components={"schemas": {"Pet": {"type": "object", "properties": {"id": {"type": "integer"}}}}},
        )
    )
    props = parse_spec_file(str(path), source="s").tools[0].input_schema["properties"]
    assert props["n"] == {"type": ["integer", "null"], "exclusiveMaximum": 5, "minimum": 1}
    assert props["e"] == {"type": ["string", "null"], "enum": ["x", "y", None]}
    assert props["r"]["anyOf"][1] == {"type": "null"}
    validator = jsonschema.Draft202012Validator({"type": "object", "properties": props})
    assert validator.is_valid({"n": None, "e": None, "r": None})
    assert not validator.is_valid({"n": 5})
    assert validator.is_valid({"n": 4})


def test_swagger_20_body_formdata_file_and_collection_format(write_spec):
    path = write_spec(
        {
            "swagger": "2.0",
            "info": {"title": "t", "version": "1"},
            "host": "api.example.com",
            "basePath": "/v2",
            "schemes": ["https"],
            "paths": {
                "/pets": {
                    "post": {
                        "operationId": "addPet",
                        "consumes": ["application/json"],
                        "parameters": [
                            {
                                "in": "body",
                                "name": "pet",
                                "required": True,
                                "schema": {"$ref": "#/definitions/Pet"},
                            }
                        ],
                        "responses": {"200": {"description": "ok", "schema": {"$ref": "#/definitions/Pet"}}},
                    }
                },
                "/pets/{petId}/photo": {
                    "post": {
                        "operationId": "upload",
                        "consumes": ["multipart/form-data"],
                        "parameters": [
                            {"in": "path", "name": "petId", "type": "integer", "required": True},
                            {"in": "formData", "name": "file", "type": "file", "required": True},
                            {"in": "formData", "name": "note", "type": "string", "x-nullable": True},
                            {
                                "in": "query",
                                "name": "tags",
                                "type": "array",
                                "items": {"type": "string"},
                                "collectionFormat": "pipes",
                            },
                        ],
                        "responses": {"200": {"description": "ok"}},
                    }
                },
            },
            "definitions": {"Pet": {"type": "object", "properties": {"name": {"type": "string"}}}},
        }
    )
    parsed = parse_spec_file(str(path), source="s")
    add, upload = parsed.tools
    assert add.input_schema["properties"]["body"]["properties"]["name"] == {"type": "string"}
    assert add.input_schema["required"] == ["body"]
    assert add.backend["server_url"] == "https://api.example.com/v2"
    body = upload.input_schema["properties"]["body"]
    assert body["properties"]["file"] == {"type": "string", "format": "binary"}
    assert body["properties"]["note"]["type"] == ["string", "null"]
    assert body["required"] == ["file"]
    assert upload.backend["body"]["content_type"] == "multipart/form-data"
    assert upload.backend["body"]["file_fields"] == ["file"]
    tags = next(p for p in upload.backend["parameters"] if p["name"] == "tags")
    assert (tags["style"], tags["explode"]) == ("pipeDelimited", False)


def test_servers_variables_and_relative_urls(write_spec):
    spec = _spec(
        {
            "/a": {
                "get": {"operationId": "a", "responses": ok()},
                "servers": [
                    {
                        "url": "https://{region}.example.com/{v}",
                        "variables": {"region": {"default": "eu"}, "v": {"default": "v2"}},
                    }
                ],
            },
            "/b": {"get": {"operationId": "b", "responses": ok()}},
        },
        servers=[{"url": "/api/v3"}],
    )
    parsed = parse_spec_file(str(write_spec(spec)), source="s")
    assert parsed.tools[0].backend["server_url"] == "https://eu.example.com/v2"
    assert parsed.tools[1].backend["server_url"] == "/api/v3"  # file spec: relative stays relative

    from toolweave.adapters.openapi.parser import parse_spec

    loader = SpecLoader()
    parsed = parse_spec(spec, "https://example.org/specs/openapi.json", source="s", loader=loader)
    assert parsed.tools[1].backend["server_url"] == "https://example.org/api/v3"


def test_include_and_exclude_by_tag_operation_id_and_path_glob(write_spec):
    paths = {
        "/pets": {"get": {"operationId": "listPets", "tags": ["pets"], "responses": ok()}},
        "/pets/{id}": {"delete": {"operationId": "deletePet", "tags": ["pets"], "responses": ok()}},
        "/store/order": {"post": {"operationId": "placeOrder", "tags": ["store"], "responses": ok()}},
    }
    path = str(write_spec(_spec(paths)))
    names = lambda **kw: [t.name for t in parse_spec_file(path, source="s", **kw).tools]  # noqa: E731
    assert names(include=["pets"]) == ["listPets", "deletePet"]
    assert names(include=["placeOrder"]) == ["placeOrder"]
    assert names(include=["/pets/*"]) == ["deletePet"]
    assert names(exclude=["DELETE /pets/*"]) == ["listPets", "placeOrder"]
    assert names(include=["pets"], exclude=["deletePet"]) == ["listPets"]


# -- bad input ------------------------------------------------------------------------------------


def test_invalid_yaml_names_the_file_and_line(write_spec):
    path = write_spec("openapi: 3.0.0\npaths:\n  /a: [unclosed\n", name="broken.yaml")
    with pytest.raises(OpenAPISpecError, match=r"broken\.yaml: invalid YAML/JSON \(line \d+"):
        parse_spec_file(str(path), source="s")


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ({"swagger": "1.2", "paths": {}}, r"#/swagger: unsupported Swagger version '1\.2'"),
        ({"openapi": "4.0.0", "paths": {}}, r"#/openapi: unsupported OpenAPI version '4\.0\.0'"),
        ({"info": {}}, r": not an OpenAPI document"),
    ],
)
def test_unsupported_versions_are_refused(write_spec, doc, message):
    with pytest.raises(OpenAPISpecError, match=r"spec\.yaml" + message):
        parse_spec_file(str(write_spec(doc)), source="s")


def test_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(OpenAPISpecError, match=r"nope\.yaml: cannot read"):
        parse_spec_file(str(tmp_path / "nope.yaml"), source="s")


def test_bad_operations_become_problems_and_the_rest_still_converts(write_spec):
    path = write_spec(
        _spec(
            {
                "/pets": {
                    "get": {"operationId": "noResponses"},
                    "post": {"operationId": "fine", "responses": ok()},
                },
                "/pets/{id}": {
                    "get": {
                        "operationId": "missingRef",
                        "parameters": [{"$ref": "#/components/parameters/Nope"}],
                        "responses": ok(),
                    }
                },
                "/owners": {
                    "get": {
                        "operationId": "missingSchema",
                        "responses": ok({"$ref": "#/components/schemas/Gone"}),
                    }
                },
                "/shared": {
                    "get": {
                        "operationId": "alsoMissing",
                        "responses": ok({"$ref": "#/components/schemas/Gone"}),
                    }
                },
            }
        )
    )
    parsed = parse_spec_file(str(path), source="s")
    assert [t.name for t in parsed.tools] == ["fine"]
    problems = {p.where: p.message for p in parsed.problems}
    assert problems["spec.yaml#/paths/~1pets/get"] == "operation has no 'responses'"
    assert "unresolvable $ref '#/components/parameters/Nope'" in problems["spec.yaml#/paths/~1pets~1{id}/get"]
    assert "'#/components/schemas/Gone'" in problems["spec.yaml#/paths/~1owners/get"]
    # The broken target is remembered: the second user gets the same clear error, not a dangling $defs ref.
    assert "'#/components/schemas/Gone'" in problems["spec.yaml#/paths/~1shared/get"]
    assert str(parsed.problems[0]).startswith("spec.yaml#/paths/~1pets/get: ")


def test_openapi_31_allows_operations_without_responses(write_spec):
    doc = _spec({"/a": {"get": {"operationId": "a"}}})
    doc["openapi"] = "3.1.0"
    parsed = parse_spec_file(str(write_spec(doc)), source="s")
    assert [t.name for t in parsed.tools] == ["a"] and not parsed.problems


def test_json_specs_and_yaml_quirks(write_spec):
    doc = _spec(
        {
            "/a": {
                "get": {
                    "operationId": "a",
                    "responses": {
                        200: {
                            "description": "ok",
                            "content": {
                                "application/json": {
                                    "schema": {
                                        "type": "object",
                                        "properties": {"when": {"type": "string", "example": "2024-01-02"}},
                                    }
                                }
                            },
                        }
                    },
                }
            }
        }
    )
    parsed = parse_spec_file(str(write_spec(doc, name="s.json")), source="s")
    assert parsed.tools[0].output_schema is not None
    yaml_text = (
        "openapi: 3.0.0\ninfo: {title: t, version: '1'}\npaths:\n  /a:\n    get:\n      operationId: a\n"
        "      responses:\n        200:\n          description: ok\n"
        "          content:\n            application/json:\n"
        "              schema: {type: object, properties: {d: {type: string, example: 2024-01-02}}}\n"
    )
    tool = parse_spec_file(str(write_spec(yaml_text, name="y.yaml")), source="s").tools[0]
    # Unquoted int response codes and dates: still plain JSON data.
    assert output_schema(tool)["properties"]["d"]["example"] == "2024-01-02"
    json.dumps(tool.model_dump(mode="json"))


def test_recursive_yaml_aliases_are_a_clear_error(write_spec):
    path = write_spec("openapi: 3.0.0\ninfo: {title: t, version: '1'}\npaths:\n  /a: &loop\n    x: [*loop]\n")
    with pytest.raises(OpenAPISpecError, match=r"spec\.yaml: recursive YAML aliases"):
        parse_spec_file(str(path), source="s")


def test_http_method_semantics_become_tool_annotations(write_spec):
    ops = {m: {"operationId": m, "responses": ok()} for m in ("get", "post", "put", "delete")}
    parsed = parse_spec_file(str(write_spec(_spec({"/things": ops}))), source="api")
    hints = {t.name: (t.read_only, t.destructive) for t in parsed.tools}
    assert hints == {
        "get": (True, False),
        "post": (False, False),
        "put": (False, False),
        "delete": (False, True),
    }
    assert _tool(parsed, "put").annotations["idempotent_hint"] is True
