"""End to end: a real petstore over HTTP on 127.0.0.1 (Starlette + uvicorn in a thread) and OpenAPIBackend.

The server records every request it gets, so the assertions are about what arrived on the wire: path,
query, body and auth header, not about what the adapter meant to send.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from tests.adapters.openapi.openapi_spec_helpers import json_body
from tests.net import serve_app
from tests.results import text_part
from toolweave.adapters.openapi import OpenAPIBackend, OpenAPISourceConfig
from toolweave.records import EdgeKind, ToolRecord

pytestmark = pytest.mark.integration

TOKEN = "tok-8f2c"
PETS = [{"id": 1, "name": "Rex", "status": "available"}, {"id": 2, "name": "Tom", "status": "sold"}]


class PetstoreServer:
    """A tiny petstore with token auth; ``requests`` is what actually arrived."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.spec: dict[str, Any] = {}
        self.app = Starlette(
            routes=[
                Route("/specs/openapi.json", self.openapi, methods=["GET"]),
                Route("/api/login", self.login, methods=["POST"]),
                Route("/api/pets", self.list_pets, methods=["GET"]),
                Route("/api/pets/{petId:path}", self.get_pet, methods=["GET"]),
                Route("/api/store/order", self.order, methods=["POST"]),
                Route("/api/boom", self.boom, methods=["GET"]),
                Route("/api/slow", self.slow, methods=["GET"]),
            ]
        )

    async def _record(self, request: Request) -> dict[str, Any]:
        body = await request.body()
        entry = {
            "method": request.method,
            "path": request.url.path,
            "raw_path": request.scope["raw_path"].decode(),
            "query": list(request.query_params.multi_items()),
            "authorization": request.headers.get("authorization"),
            "content_type": request.headers.get("content-type"),
            "body": json.loads(body) if body else None,
        }
        self.requests.append(entry)
        return entry

    async def openapi(self, request: Request) -> Response:
        return JSONResponse(self.spec)

    async def login(self, request: Request) -> Response:
        entry = await self._record(request)
        if entry["body"] != {"username": "ann", "password": "pw"}:
            return JSONResponse({"error": "bad credentials"}, status_code=401)
        return JSONResponse({"token": TOKEN, "expires_in": 3600})

    async def list_pets(self, request: Request) -> Response:
        await self._record(request)
        status = request.query_params.get("status")
        limit = int(request.query_params.get("limit", "100"))
        return JSONResponse([p for p in PETS if status in (None, p["status"])][:limit])

    async def get_pet(self, request: Request) -> Response:
        await self._record(request)
        pet_id = request.path_params["petId"]
        pet = next((p for p in PETS if str(p["id"]) == pet_id), None)
        if pet is None:
            return JSONResponse({"message": f"pet {pet_id} not found"}, status_code=404)
        return JSONResponse(pet)

    async def order(self, request: Request) -> Response:
        entry = await self._record(request)
        if entry["authorization"] != f"Bearer {TOKEN}":
            return JSONResponse({"message": "missing or bad token"}, status_code=401)
        return JSONResponse({"id": 99, "petId": entry["body"]["petId"], "status": "placed"}, status_code=201)

    async def boom(self, request: Request) -> Response:
        await self._record(request)
        return PlainTextResponse("database on fire", status_code=500)

    async def slow(self, request: Request) -> Response:
        await self._record(request)
        await asyncio.sleep(1.0)
        return JSONResponse({})


@pytest.fixture(scope="module")
def petstore() -> Iterator[tuple[PetstoreServer, str]]:
    store = PetstoreServer()
    with serve_app(store.app) as base:
        yield store, base


def _spec(base: str) -> dict[str, Any]:
    pet = {
        "type": "object",
        "required": ["id", "name"],
        "properties": {"id": {"type": "integer"}, "name": {"type": "string"}, "status": {"type": "string"}},
    }

    def json_ok(schema: dict[str, Any], code: str = "200") -> dict[str, Any]:
        return {code: {"description": "ok", "content": {"application/json": {"schema": schema}}}}

    return {
        "openapi": "3.0.3",
        "info": {"title": "Petstore", "version": "1.0"},
        "servers": [{"url": base + "/{prefix}", "variables": {"prefix": {"default": "api"}}}],
        "security": [{"bearerAuth": []}],
        "components": {
            "securitySchemes": {"bearerAuth": {"type": "http", "scheme": "bearer"}},
            "schemas": {"Pet": pet},
        },
        "paths": {
            "/login": {
                "post": {
                    "operationId": "login",
                    "summary": "Log in and get a token",
                    "security": [],
                    "requestBody": json_body(
                        {"username": {"type": "string"}, "password": {"type": "string"}}
                    ),
                    "responses": json_ok(
                        {
                            "type": "object",
                            "properties": {"token": {"type": "string"}, "expires_in": {"type": "integer"}},
                        }
                    ),
                }
            },
            "/pets": {
                "get": {
                    "operationId": "findPets",
                    "summary": "List pets",
                    "tags": ["pets"],
                    "parameters": [
                        {"name": "status", "in": "query", "schema": {"type": "string"}},
                        {"name": "limit", "in": "query", "schema": {"type": "integer"}},
                    ],
                    "responses": json_ok({"type": "array", "items": {"$ref": "#/components/schemas/Pet"}}),
                }
            },
            "/pets/{petId}": {
                "get": {
                    "operationId": "getPetById",
                    "summary": "Find a pet by id",
                    "tags": ["pets"],
                    "parameters": [
                        {"name": "petId", "in": "path", "required": True, "schema": {"type": "string"}}
                    ],
                    "responses": json_ok({"$ref": "#/components/schemas/Pet"}),
                }
            },
            "/store/order": {
                "post": {
                    "operationId": "placeOrder",
                    "summary": "Order a pet",
                    "tags": ["store"],
                    "requestBody": json_body(
                        {"petId": {"type": "integer"}, "quantity": {"type": "integer"}}, required=["petId"]
                    ),
                    "responses": json_ok(
                        {"type": "object", "properties": {"id": {"type": "integer"}}}, "201"
                    ),
                }
            },
            "/boom": {"get": {"operationId": "boom", "responses": json_ok({"type": "object"})}},
            "/slow": {"get": {"operationId": "slow", "responses": json_ok({"type": "object"})}},
        },
    }


@pytest.fixture(scope="module")
def loaded(petstore, tmp_path_factory) -> tuple[OpenAPISourceConfig, dict[str, ToolRecord], list[Any]]:
    _, base = petstore
    spec = Path(tmp_path_factory.mktemp("petstore")) / "petstore.yaml"
    spec.write_text(yaml.safe_dump(_spec(base), sort_keys=False))
    config = OpenAPISourceConfig(
        name="petstore",
        spec=str(spec),
        timeout_s=5,
        auth={"type": "bearer", "token_env": "PETSTORE_TOKEN"},
        retries=1,
    )
    tools, edges = OpenAPIBackend(config).load()
    return config, {t.name: t for t in tools}, edges


def _call(
    config: OpenAPISourceConfig,
    tool: ToolRecord,
    arguments: dict[str, Any],
    environ: dict[str, str],
    **kwargs: Any,
) -> Any:
    async def go() -> Any:
        async with httpx.AsyncClient() as client:
            return await OpenAPIBackend(config, client, environ=environ).call(tool, arguments, **kwargs)

    return asyncio.run(go())


def test_edges_include_order_needs_login_token_and_pet_ids(loaded):
    _, tools, edges = loaded
    got = {(e.tool, e.depends_on, e.kind, e.parameter_name) for e in edges}
    assert ("petstore__placeOrder", "petstore__login", EdgeKind.TOOL_DIRECTLY_DEPENDS_ON, None) in got
    assert (
        "petstore__placeOrder",
        "petstore__findPets",
        EdgeKind.PARAMETER_DIRECTLY_DEPENDS_ON,
        "body.petId",
    ) in got
    assert (
        "petstore__getPetById",
        "petstore__findPets",
        EdgeKind.PARAMETER_DIRECTLY_DEPENDS_ON,
        "petId",
    ) in got
    assert not any(e.tool == "petstore__login" for e in edges)  # login needs nothing
    assert tools["placeOrder"].backend["server_url"].endswith("/api")


def test_calls_reach_the_server_with_path_query_body_and_auth(petstore, loaded):
    store, _ = petstore
    config, tools, _ = loaded
    store.requests.clear()
    environ: dict[str, str] = {}

    login = _call(config, tools["login"], {"body": {"username": "ann", "password": "pw"}}, environ)
    assert not login.is_error and login.structured_content["token"] == TOKEN
    environ["PETSTORE_TOKEN"] = login.structured_content["token"]  # the token an agent would keep

    listed = _call(config, tools["findPets"], {"status": "available", "limit": 5}, environ)
    assert listed.structured_content == {"result": [PETS[0]]}
    assert json.loads(text_part(listed)) == [PETS[0]]

    pet = _call(config, tools["getPetById"], {"petId": "1"}, environ)
    assert pet.structured_content == PETS[0]

    order = _call(config, tools["placeOrder"], {"body": {"petId": 1, "quantity": 2}}, environ)
    assert not order.is_error and order.structured_content == {"id": 99, "petId": 1, "status": "placed"}

    login_req, list_req, pet_req, order_req = store.requests
    assert (login_req["method"], login_req["path"], login_req["authorization"]) == (
        "POST",
        "/api/login",
        None,
    )
    assert login_req["body"] == {"username": "ann", "password": "pw"}
    assert (list_req["path"], list_req["query"]) == ("/api/pets", [("status", "available"), ("limit", "5")])
    assert list_req["authorization"] == f"Bearer {TOKEN}"
    assert pet_req["path"] == "/api/pets/1"
    assert order_req["path"] == "/api/store/order" and order_req["content_type"] == "application/json"
    assert order_req["body"] == {"petId": 1, "quantity": 2}
    assert order_req["authorization"] == f"Bearer {TOKEN}"


def test_path_parameters_are_percent_encoded_on_the_wire(petstore, loaded):
    store, _ = petstore
    config, tools, _ = loaded
    store.requests.clear()
    result = _call(config, tools["getPetById"], {"petId": "a/b c"}, {"PETSTORE_TOKEN": TOKEN})
    assert store.requests[0]["raw_path"] == "/api/pets/a%2Fb%20c"
    assert result.is_error and "HTTP 404 Not Found" in text_part(result)


def test_errors_come_back_as_clear_error_results(petstore, loaded):
    store, _ = petstore
    config, tools, _ = loaded
    environ = {"PETSTORE_TOKEN": TOKEN}

    missing = _call(config, tools["getPetById"], {"petId": "404"}, environ)
    assert missing.is_error
    assert text_part(missing).startswith("upstream_error: HTTP 404 Not Found from GET http://127.0.0.1:")
    assert "pet 404 not found" in text_part(missing)

    store.requests.clear()
    boom = _call(config, tools["boom"], {}, environ)
    assert boom.is_error and "HTTP 500 Internal Server Error" in text_part(boom)
    assert "database on fire" in text_part(boom)
    assert len(store.requests) == 2  # GET is idempotent: retried once (retries=1), then reported

    unauthorized = _call(config, tools["placeOrder"], {"body": {"petId": 1}}, {"PETSTORE_TOKEN": "wrong"})
    assert unauthorized.is_error and "HTTP 401" in text_part(unauthorized)

    no_path_param = _call(config, tools["getPetById"], {}, environ)
    assert no_path_param.is_error and "missing required path parameter 'petId'" in text_part(no_path_param)

    store.requests.clear()
    slow = _call(config, tools["slow"], {}, environ, timeout_s=0.3)
    assert slow.is_error and "no answer within 0.3 s (call timeout)" in text_part(slow)
    assert slow.structured_content["error"]["code"] == "timeout"
    assert len(store.requests) == 1  # read timeouts are not retried (a GET that errored is, see above)


def test_spec_loaded_from_a_url_with_a_relative_server(petstore):
    store, base = petstore
    spec = _spec(base)
    spec["servers"] = [{"url": "../api"}]  # relative to the spec's own URL
    store.spec = spec
    config = OpenAPISourceConfig(name="remote", spec=f"{base}/specs/openapi.json")
    tools, _ = OpenAPIBackend(config).load()
    by_name = {t.name: t for t in tools}
    assert by_name["findPets"].backend["server_url"] == f"{base}/api"
    store.requests.clear()
    result = _call(config, by_name["findPets"], {"status": "sold"}, {})
    assert result.structured_content == {"result": [PETS[1]]}
    assert store.requests[0]["path"] == "/api/pets"
