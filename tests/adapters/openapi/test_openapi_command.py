"""`toolweave openapi SPEC [--json] [--arazzo FILE]`: prints tools and edges, touches no registry."""

from __future__ import annotations

import json

import jsonschema
from typer.testing import CliRunner

from tests.adapters.openapi.openapi_spec_helpers import param
from toolweave.cli import app


def test_json_output_has_mcp_wire_tools_and_edges(links_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("TOOLWEAVE_HOME", str(tmp_path / "home"))
    raw = links_dir / "raw"
    result = CliRunner().invoke(
        app,
        [
            "openapi",
            str(raw / "pet-coupons.openapi.yaml"),
            "--json",
            "--arazzo",
            str(raw / "pet-coupons.arazzo.yaml"),
        ],
    )
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert len(payload["tools"]) == 11
    tool = next(t for t in payload["tools"] if t["name"] == "pet-coupons__getPetById")
    assert set(tool) >= {"name", "description", "inputSchema", "outputSchema"}
    jsonschema.Draft202012Validator.check_schema(tool["inputSchema"])
    declared = {(e["tool"], e["depends_on"]) for e in payload["edges"] if e["origin"] == "declared"}
    assert ("pet-coupons__getPetCoupons", "pet-coupons__findPetsByTags") in declared
    assert payload["problems"] == []
    assert not (tmp_path / "home").exists()  # no registry was created


def test_text_output_and_problems(write_spec):
    spec = write_spec(
        {
            "openapi": "3.0.0",
            "info": {"title": "t", "version": "1"},
            "paths": {
                "/a/{id}": {
                    "get": {
                        "operationId": "getA",
                        "summary": "Get an A",
                        "parameters": [param("id", "path", "string", required=True)],
                        "responses": {"200": {"description": "ok"}},
                    }
                },
                "/b": {"get": {"operationId": "noResponses"}},
            },
        }
    )
    result = CliRunner().invoke(app, ["openapi", str(spec), "--source", "demo"])
    assert result.exit_code == 0, result.output
    assert "demo__getA  [GET /a/{id}]" in result.stdout
    assert "inputs: id* (string)" in result.stdout
    assert "1 tools, 0 edges" in result.stdout
    assert "spec.yaml#/paths/~1b/get: operation has no 'responses'" in result.stdout


def test_unusable_spec_exits_1_with_a_one_line_error(write_spec):
    spec = write_spec({"swagger": "1.2", "paths": {}}, name="old.yaml")
    result = CliRunner().invoke(app, ["openapi", str(spec)])
    assert result.exit_code == 1
    assert "error: old.yaml#/swagger: unsupported Swagger version '1.2'" in result.output
