"""Request building and result shaping, through ``httpx.MockTransport`` (no sockets)."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from tests.adapters.openapi.openapi_spec_helpers import ok
from tests.results import text_part
from toolweave.adapters.openapi import OpenAPIBackend, OpenAPISourceConfig
from toolweave.adapters.openapi.calls import Credentials, build_request, resolve_credentials
from toolweave.adapters.openapi.config import AuthConfig
from toolweave.errors import AdapterError, ToolArgumentsError
from toolweave.records import ToolRecord

SPEC: dict[str, Any] = {
    "openapi": "3.0.3",
    "info": {"title": "t", "version": "1"},
    "servers": [{"url": "https://api.example.com/v1"}],
    "security": [{"key": []}],
    "components": {"securitySchemes": {"key": {"type": "apiKey", "in": "header", "name": "X-Key"}}},
    "paths": {
        "/files/{path}/{ids}": {
            "get": {
                "operationId": "getFile",
                "parameters": [
                    {"name": "path", "in": "path", "required": True, "schema": {"type": "string"}},
                    {
                        "name": "ids",
                        "in": "path",
                        "required": True,
                        "schema": {"type": "array", "items": {"type": "integer"}},
                    },
                    {"name": "tags", "in": "query", "schema": {"type": "array", "items": {"type": "string"}}},
                    {
                        "name": "csv",
                        "in": "query",
                        "explode": False,
                        "schema": {"type": "array", "items": {"type": "string"}},
                    },
                    {"name": "filter", "in": "query", "style": "deepObject", "schema": {"type": "object"}},
                    {"name": "flag", "in": "query", "schema": {"type": "boolean"}},
                    {"name": "X-Req", "in": "header", "schema": {"type": "string"}},
                    {"name": "sid", "in": "cookie", "schema": {"type": "string"}},
                ],
                "responses": ok({"type": "object"}),
            }
        },
        "/pets": {
            "post": {
                "operationId": "addPet",
                "requestBody": {
                    "required": True,
                    "content": {"application/json": {"schema": {"type": "object"}}},
                },
                "responses": ok({"type": "object"}),
            },
            "get": {
                "operationId": "listPets",
                "responses": ok({"type": "array", "items": {"type": "object"}}),
            },
        },
        "/form": {
            "post": {
                "operationId": "form",
                "requestBody": {
                    "content": {"application/x-www-form-urlencoded": {"schema": {"type": "object"}}}
                },
                "responses": ok(),
            }
        },
        "/upload": {
            "post": {
                "operationId": "upload",
                "requestBody": {
                    "content": {
                        "multipart/form-data": {
                            "schema": {
                                "type": "object",
                                "properties": {
                                    "file": {"type": "string", "format": "binary"},
                                    "note": {"type": "string"},
                                },
                            }
                        }
                    }
                },
                "responses": ok(),
            }
        },
        "/login": {"post": {"operationId": "login", "security": [], "responses": ok()}},
    },
}


@pytest.fixture
def tools(write_spec) -> dict[str, ToolRecord]:
    backend = OpenAPIBackend(OpenAPISourceConfig(name="t", spec=str(write_spec(SPEC))))
    loaded, _ = backend.load()
    return {t.name: t for t in loaded}


def _run(
    tool: ToolRecord,
    arguments: dict[str, Any],
    handler: Callable[[httpx.Request], httpx.Response],
    **config: Any,
) -> Any:
    async def go() -> Any:
        async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
            cfg = OpenAPISourceConfig(name="t", spec="unused.yaml", **config)
            backend = OpenAPIBackend(
                cfg, client, environ={"API_KEY": "s3cret", "TOKEN": "tok", "U": "me", "P": "pw"}
            )
            return await backend.call(tool, arguments)

    return asyncio.run(go())


def _json_handler(
    seen: list[httpx.Request], status: int = 200, body: Any = None
) -> Callable[..., httpx.Response]:
    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(status, json={"ok": True} if body is None else body)

    return handler


def test_path_query_header_cookie_serialisation(tools):
    request = build_request(
        tools["getFile"].backend,
        {
            "path": "a/b c?",
            "ids": [1, 2],
            "tags": ["x", "y"],
            "csv": ["p", "q"],
            "filter": {"color": "red"},
            "flag": True,
            "X-Req": "r1",
            "sid": "abc def",
            "unknown": 1,
        },
    )
    assert request.method == "GET"
    assert request.url.raw_path.decode().split("?")[0] == "/v1/files/a%2Fb%20c%3F/1,2"
    assert request.url.params.multi_items() == [
        ("tags", "x"),
        ("tags", "y"),
        ("csv", "p,q"),
        ("filter[color]", "red"),
        ("flag", "true"),
    ]
    assert request.headers["X-Req"] == "r1"
    assert request.headers["Cookie"] == "sid=abc%20def"


def test_missing_path_parameter_is_an_error_result_not_a_crash(tools):
    with pytest.raises(ToolArgumentsError, match="missing required path parameter 'ids'"):
        build_request(tools["getFile"].backend, {"path": "x"})
    seen: list[httpx.Request] = []
    result = _run(tools["getFile"], {"path": "x"}, _json_handler(seen))
    assert result.is_error and "missing required path parameter 'ids'" in text_part(result)
    assert seen == []


def test_json_body_and_structured_content(tools):
    seen: list[httpx.Request] = []
    result = _run(
        tools["addPet"], {"body": {"name": "Rex", "tags": ["a"]}}, _json_handler(seen, body={"id": 7})
    )
    assert json.loads(seen[0].content) == {"name": "Rex", "tags": ["a"]}
    assert seen[0].headers["Content-Type"] == "application/json"
    assert not result.is_error
    assert text_part(result) == json.dumps({"id": 7}, indent=2)
    assert result.structured_content == {"id": 7}


def test_flattened_body_arguments_still_work(tools):
    seen: list[httpx.Request] = []
    _run(tools["addPet"], {"name": "Rex"}, _json_handler(seen))
    assert json.loads(seen[0].content) == {"name": "Rex"}


def test_array_response_is_wrapped_as_structured_result(tools):
    seen: list[httpx.Request] = []
    result = _run(tools["listPets"], {}, _json_handler(seen, body=[{"id": 1}]))
    assert result.structured_content == {"result": [{"id": 1}]}


def test_form_and_multipart_bodies(tools):
    seen: list[httpx.Request] = []
    _run(tools["form"], {"body": {"a": 1, "b": [True, "x y"]}}, _json_handler(seen))
    assert seen[0].headers["Content-Type"] == "application/x-www-form-urlencoded"
    assert seen[0].content == b"a=1&b=true&b=x+y"
    _run(
        tools["upload"],
        {
            "body": {
                "file": {"filename": "a.txt", "content_base64": base64.b64encode(b"hi").decode()},
                "note": "n",
            }
        },
        _json_handler(seen),
    )
    multipart = seen[1]
    assert multipart.headers["Content-Type"].startswith("multipart/form-data; boundary=")
    text = multipart.read().decode()
    assert 'name="file"; filename="a.txt"' in text and "\r\n\r\nhi\r\n" in text
    assert 'name="note"\r\n\r\nn\r\n' in text
    # No file given: still multipart (not silently urlencoded).
    _run(tools["upload"], {"body": {"note": "only"}}, _json_handler(seen))
    assert seen[2].headers["Content-Type"].startswith("multipart/form-data")


@pytest.mark.parametrize(
    ("auth", "check"),
    [
        ({"type": "bearer", "token_env": "TOKEN"}, lambda r: r.headers["Authorization"] == "Bearer tok"),
        (
            {"type": "basic", "username_env": "U", "password_env": "P"},
            lambda r: r.headers["Authorization"] == "Basic " + base64.b64encode(b"me:pw").decode(),
        ),
        (
            {"type": "api_key", "key_env": "API_KEY", "in": "header", "name": "X-Key"},
            lambda r: r.headers["X-Key"] == "s3cret",
        ),
        (
            {"type": "api_key", "key_env": "API_KEY", "in": "query", "name": "key"},
            lambda r: r.url.params["key"] == "s3cret",
        ),
        (
            {"type": "api_key", "key_env": "API_KEY", "in": "cookie", "name": "k"},
            lambda r: r.headers["Cookie"] == "k=s3cret",
        ),
    ],
)
def test_auth_from_environment_variables(tools, auth, check):
    seen: list[httpx.Request] = []
    result = _run(tools["listPets"], {}, _json_handler(seen), auth=auth)
    assert not result.is_error
    assert check(seen[0])
    # `security: []` operations are anonymous: no credentials sent.
    _run(tools["login"], {}, _json_handler(seen), auth=auth)
    assert "Authorization" not in seen[1].headers and "key" not in seen[1].url.params
    assert "s3cret" not in json.dumps(tools["listPets"].model_dump(mode="json"))


def test_missing_secret_environment_variable_is_a_clear_error(tools):
    result = _run(
        tools["listPets"], {}, _json_handler([]), auth={"type": "bearer", "token_env": "NOT_SET_ANYWHERE"}
    )
    assert result.is_error and "environment variable NOT_SET_ANYWHERE" in text_part(result)
    # An anonymous operation (the login issuing the token) works before the secret exists.
    login = _run(
        tools["login"], {}, _json_handler([]), auth={"type": "bearer", "token_env": "NOT_SET_ANYWHERE"}
    )
    assert not login.is_error
    with pytest.raises(AdapterError):
        resolve_credentials(AuthConfig(type="bearer", token_env="NOPE"), {})
    assert "tok" not in repr(Credentials(headers={"Authorization": "Bearer tok"}))


def test_base_url_override_and_missing_base_url(tools):
    seen: list[httpx.Request] = []
    _run(tools["listPets"], {}, _json_handler(seen), base_url="http://127.0.0.1:9/api/")
    assert str(seen[0].url) == "http://127.0.0.1:9/api/pets"
    backend = dict(tools["listPets"].backend, server_url="/relative")
    with pytest.raises(AdapterError, match="no absolute base URL"):
        build_request(backend, {})


def test_non_2xx_becomes_error_with_status_reason_and_excerpt(tools):
    result = _run(
        tools["addPet"], {"body": {}}, _json_handler([], status=404, body={"message": "no such pet"})
    )
    assert result.is_error
    text = text_part(result)
    assert text.startswith("upstream_error: HTTP 404 Not Found from POST https://api.example.com/v1/pets")
    assert result.structured_content["error"]["code"] == "upstream_error"
    assert "no such pet" in text


def test_large_bodies_are_truncated_with_the_full_size(tools):
    def serve(body: bytes):
        def handler(request: httpx.Request) -> httpx.Response:
            return httpx.Response(200, content=body, headers={"content-type": "application/json"})

        return handler

    # within 4x the limit: parsed, pretty-printed, then cut
    big = {"data": "x" * 3000}
    raw = json.dumps(big).encode()
    result = _run(tools["addPet"], {"body": {}}, serve(raw), max_response_bytes=1000)
    text = text_part(result)
    full = len(json.dumps(big, indent=2).encode())
    assert text.endswith(
        f"\n\n[truncated: showing the first 1,000 of {full:,} bytes ({len(raw):,} bytes as received)]"
    )
    assert len(text) < 1200 and result.structured_content is None

    # far over the limit: never held whole in memory; the note still gives the full size
    huge = json.dumps({"data": "y" * 3_000_000}).encode()
    result = _run(tools["addPet"], {"body": {}}, serve(huge), max_response_bytes=1000)
    text = text_part(result)
    assert text.endswith(f"\n\n[truncated: showing the first 1,000 of {len(huge):,} bytes as received]")
    assert len(text) < 1200 and result.structured_content is None


def test_retries_only_idempotent_methods_on_5xx_and_connect_errors(tools):
    attempts: list[str] = []

    def flaky(request: httpx.Request) -> httpx.Response:
        attempts.append(request.method)
        if len(attempts) == 1:
            raise httpx.ConnectError("refused", request=request)
        if len(attempts) == 2:
            return httpx.Response(503)
        return httpx.Response(200, json=[])

    result = _run(tools["listPets"], {}, flaky)
    assert attempts == ["GET", "GET", "GET"] and not result.is_error

    def answering(status: int) -> Callable[[httpx.Request], httpx.Response]:
        def answer(request: httpx.Request) -> httpx.Response:
            attempts.append(request.method)
            return httpx.Response(status)

        return answer

    attempts.clear()
    result = _run(tools["addPet"], {"body": {}}, answering(503))
    assert attempts == ["POST"] and result.is_error and "HTTP 503" in text_part(result)

    attempts.clear()
    result = _run(tools["listPets"], {}, answering(500), retries=1)
    assert attempts == ["GET", "GET"] and result.is_error


def test_timeouts_and_connection_failures_are_error_results(tools):
    def slow(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("too slow", request=request)

    result = _run(tools["listPets"], {}, slow, timeout_s=1.5)
    assert result.is_error and "no answer within 1.5 s (call timeout)" in text_part(result)

    def down(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    result = _run(tools["addPet"], {"body": {}}, down)
    assert result.is_error and "ConnectError" in text_part(result)


def test_one_budget_covers_every_attempt_and_defaults_to_the_gateways(tools):
    # An entry without its own timeout_s gets the gateway's call_timeout_s (kinds.py passes it), and
    # the budget bounds the whole call: it was 30 s per attempt, x 3 attempts, whatever the gateway said.
    attempts = []

    async def hangs(request: httpx.Request) -> httpx.Response:
        attempts.append(request)
        await asyncio.sleep(30)
        return httpx.Response(200, json=[])

    async def go() -> Any:
        async with httpx.AsyncClient(transport=httpx.MockTransport(hangs)) as client:
            cfg = OpenAPISourceConfig(name="t", spec="unused.yaml", retries=2)
            backend = OpenAPIBackend(cfg, client, call_timeout_s=0.3)
            assert backend.call_timeout_s is None  # no budget of its own: the gateway's applies
            return await backend.call(tools["listPets"], {})

    result = asyncio.run(go())
    assert result.is_error and "no answer within 0.3 s (call timeout)" in text_part(result)
    assert len(attempts) == 1


def test_text_and_binary_responses(tools):
    result = _run(
        tools["listPets"],
        {},
        lambda r: httpx.Response(200, text="plain", headers={"content-type": "text/plain"}),
    )
    assert text_part(result) == "plain"
    result = _run(
        tools["listPets"],
        {},
        lambda r: httpx.Response(200, content=b"\x89PNG", headers={"content-type": "image/png"}),
    )
    assert text_part(result) == "binary response: 4 bytes of image/png (not shown)"
    result = _run(tools["listPets"], {}, lambda r: httpx.Response(204))
    assert text_part(result) == "HTTP 204 No Content (empty body)" and not result.is_error


def test_unencodable_header_value_is_an_error_result(tools):
    seen: list[httpx.Request] = []
    result = _run(tools["getFile"], {"path": "p", "ids": [1], "X-Req": "naïve ☃"}, _json_handler(seen))
    assert result.is_error and "cannot build the request for GET /files/{path}/{ids}" in text_part(result)
    assert seen == []


def test_run_reports_tools_once_and_retries_an_unreadable_spec(write_spec, tmp_path, monkeypatch):
    from toolweave.adapters.openapi import backend as backend_module

    monkeypatch.setattr(backend_module, "_RELOAD_BACKOFF_S", (0.05,))
    missing = tmp_path / "later.yaml"
    reports: list[tuple[str, int, int]] = []

    async def on_tools(source: str, tools: Any, edges: Any) -> None:
        reports.append((source, len(tools), len(edges)))

    async def go() -> None:
        backend = OpenAPIBackend(OpenAPISourceConfig(name="later", spec=str(missing)))
        task = asyncio.create_task(backend.run(on_tools))
        for _ in range(200):  # wait for a failed load to be recorded (not a fixed race window)
            if backend.last_error is not None:
                break
            await asyncio.sleep(0.01)
        assert backend.last_error is not None
        assert reports == [] and not backend.available  # still retrying: the spec is not there
        write_spec(SPEC, name="later.yaml")
        for _ in range(100):
            if reports:
                break
            await asyncio.sleep(0.05)
        assert backend.available
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(go())
    assert [(source, count) for source, count, _ in reports] == [("later", 6)]  # reported exactly once
