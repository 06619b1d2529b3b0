"""Dependency edges: Link Objects and Arazzo vs the gold of ../shared/datasets/openapi_links, heuristics."""

from __future__ import annotations

from typing import Any

import pytest

from tests.adapters.openapi.openapi_spec_helpers import json_body, ok
from toolweave.adapters.openapi.links import arazzo_edges, infer_edges, link_edges
from toolweave.adapters.openapi.parser import parse_spec_file
from toolweave.benchmark.openapi_links import found_edges, gold_edges
from toolweave.errors import OpenAPISpecError
from toolweave.records import EdgeKind


def test_every_link_declared_edge_is_recovered(links_dir):
    _, from_links = gold_edges(links_dir)
    found, _ = found_edges(links_dir, infer=False)
    assert len(from_links) == 6
    assert from_links <= found


def test_declared_edges_match_the_gold_exactly(links_dir):
    gold, _ = gold_edges(links_dir)
    found, edges = found_edges(links_dir, infer=False)
    assert found == gold  # precision 1 and recall 1 on links + Arazzo
    assert all(e.origin == "declared" and e.confidence == 1.0 and e.reason for e in edges)


def test_link_parameters_map_to_input_properties(links_dir):
    parsed = parse_spec_file(str(links_dir / "raw" / "link-example.yaml"), source="le")
    edges = link_edges(parsed)
    merge = {(e.depends_on, e.parameter_name) for e in edges if e.tool == "le__mergePullRequest"}
    assert merge == {
        ("le__getPullRequestsById", "username"),
        ("le__getPullRequestsById", "slug"),
        ("le__getPullRequestsById", "pid"),
    }
    assert all(e.kind is EdgeKind.PARAMETER_DIRECTLY_DEPENDS_ON for e in edges)
    assert any("$response.body#/owner/username" in e.reason for e in edges)


def test_arazzo_nested_workflows_and_parameter_edges(links_dir):
    parsed = parse_spec_file(str(links_dir / "raw" / "pet-coupons.openapi.yaml"), source="pc")
    import yaml

    doc = yaml.safe_load((links_dir / "raw" / "pet-coupons.arazzo.yaml").read_text())
    edges = arazzo_edges(parsed, doc, name="pet-coupons.arazzo.yaml")
    coupons = [e for e in edges if e.tool == "pc__getPetCoupons"]
    # `pet_id` in the workflow is the path parameter `petId` of the operation.
    assert [(e.depends_on, e.kind, e.parameter_name) for e in coupons] == [
        ("pc__findPetsByTags", EdgeKind.PARAMETER_DIRECTLY_DEPENDS_ON, "petId")
    ]
    order = {e.depends_on for e in edges if e.tool == "pc__placeOrder"}
    assert order == {"pc__findPetsByTags", "pc__getPetCoupons", "pc__findPetsByStatus"}
    with pytest.raises(OpenAPISpecError, match="not an Arazzo document"):
        arazzo_edges(parsed, {"openapi": "3.0.0"}, name="x.yaml")


def _petstore_spec() -> dict[str, Any]:
    pet = {"type": "object", "properties": {"id": {"type": "integer"}, "name": {"type": "string"}}}
    return {
        "openapi": "3.0.3",
        "info": {"title": "p", "version": "1"},
        "security": [{"bearer": []}],
        "components": {"securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}},
        "paths": {
            "/login": {
                "post": {
                    "operationId": "login",
                    "security": [],
                    "responses": ok({"type": "object", "properties": {"token": {"type": "string"}}}),
                }
            },
            "/pets": {
                "get": {"operationId": "listPets", "responses": ok({"type": "array", "items": pet})},
                "post": {"operationId": "createPet", "responses": ok(pet, "201")},
            },
            "/pets/{petId}": {
                "get": {
                    "operationId": "getPet",
                    "parameters": [
                        {"name": "petId", "in": "path", "required": True, "schema": {"type": "integer"}}
                    ],
                    "responses": ok(pet),
                }
            },
            "/store/order": {
                "post": {
                    "operationId": "placeOrder",
                    "requestBody": json_body(
                        {"petId": {"type": "integer"}, "quantity": {"type": "integer"}}, optional=True
                    ),
                    "responses": ok({"type": "object", "properties": {"id": {"type": "integer"}}}),
                }
            },
            "/stats": {
                "get": {
                    "operationId": "stats",
                    "parameters": [
                        {"name": "page", "in": "query", "required": True, "schema": {"type": "integer"}}
                    ],
                    "responses": ok({"type": "object", "properties": {"page": {"type": "integer"}}}),
                }
            },
        },
    }


def test_inferred_id_and_token_edges(write_spec):
    parsed = parse_spec_file(str(write_spec(_petstore_spec())), source="p")
    edges = infer_edges(parsed)
    got = {(e.tool, e.depends_on, e.kind, e.parameter_name) for e in edges}
    param = EdgeKind.PARAMETER_DIRECTLY_DEPENDS_ON
    assert ("p__getPet", "p__listPets", param, "petId") in got
    assert ("p__placeOrder", "p__listPets", param, "body.petId") in got
    # List beats create when both exist; the operation needing the id never produces it.
    assert not any(e.depends_on in ("p__createPet", "p__getPet") for e in edges if e.kind is param)
    token = {(e.tool, e.depends_on) for e in edges if e.kind is EdgeKind.TOOL_DIRECTLY_DEPENDS_ON}
    assert token == {
        (f"p__{op}", "p__login") for op in ("listPets", "createPet", "getPet", "placeOrder", "stats")
    }
    assert all(e.origin == "inferred" and 0 < e.confidence < 1 and e.reason for e in edges)
    # `page` is not an id: no edge from an operation that merely returns a `page` field.
    assert not any(e.parameter_name == "page" for e in edges)


def test_oauth2_token_url_operation_feeds_secured_operations(write_spec):
    spec = {
        "openapi": "3.0.3",
        "info": {"title": "o", "version": "1"},
        "servers": [{"url": "https://api.example.com/v1"}],
        "components": {
            "securitySchemes": {
                "oauth": {
                    "type": "oauth2",
                    "flows": {
                        "clientCredentials": {
                            "tokenUrl": "https://api.example.com/v1/oauth/token",
                            "scopes": {},
                        }
                    },
                }
            }
        },
        "paths": {
            "/oauth/token": {"post": {"operationId": "getToken", "responses": ok()}},
            "/things": {"get": {"operationId": "listThings", "security": [{"oauth": []}], "responses": ok()}},
            "/public": {"get": {"operationId": "public", "responses": ok()}},
        },
    }
    edges = infer_edges(parse_spec_file(str(write_spec(spec)), source="o"))
    assert [(e.tool, e.depends_on, e.confidence) for e in edges] == [("o__listThings", "o__getToken", 0.9)]
