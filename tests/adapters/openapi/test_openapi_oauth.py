"""OAuth 2.0 client credentials end to end: a real token endpoint and a real API on 127.0.0.1 (Starlette
under uvicorn), and ``OpenAPIBackend`` with ``auth: {type: oauth2}``.

The server counts the token requests and says which tokens it honours, so the assertions are about what
crossed the wire: one token request for many calls, a new one when the token expires or is revoked,
the client's credentials where the configuration puts them, and no secret in any error or log line."""

from __future__ import annotations

import asyncio
import base64
import logging
from collections.abc import Iterator
from typing import Any
from urllib.parse import unquote

import httpx
import pytest
from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from tests.net import free_port, serve_app
from tests.results import text_part
from toolweave.adapters.openapi import OpenAPIBackend, OpenAPISourceConfig
from toolweave.adapters.openapi.config import AuthConfig
from toolweave.records import ToolRecord

pytestmark = pytest.mark.integration

CLIENT_ID, SECRET = "svc:reports", "s3cr+t/value"  # both need form-encoding in a Basic header
ENVIRON = {"CID": CLIENT_ID, "CSECRET": SECRET}


class AuthServer:
    """A token endpoint (client credentials only) and one protected operation."""

    def __init__(self) -> None:
        self.token_requests: list[dict[str, Any]] = []
        self.valid: set[str] = set()
        self.lifetime: int | None = 3600
        self.delay_s = 0.0
        self.app = Starlette(
            routes=[
                Route("/oauth/token", self.token, methods=["POST"]),
                Route("/api/reports", self.reports, methods=["GET"]),
            ]
        )

    async def token(self, request: Request) -> Response:
        form = dict(await request.form())
        header = request.headers.get("authorization", "")
        if header.startswith("Basic "):
            user, _, password = base64.b64decode(header[6:]).decode().partition(":")
            client = (unquote(user), unquote(password))
        else:
            client = (str(form.get("client_id")), str(form.get("client_secret")))
        self.token_requests.append({"form": form, "basic": header.startswith("Basic ")})
        await asyncio.sleep(self.delay_s)
        if client != (CLIENT_ID, SECRET):
            return JSONResponse(
                {"error": "invalid_client", "error_description": "bad secret"}, status_code=401
            )
        if form.get("grant_type") != "client_credentials":
            return JSONResponse({"error": "unsupported_grant_type"}, status_code=400)
        token = f"tok-{len(self.token_requests)}"
        self.valid.add(token)
        body: dict[str, Any] = {"access_token": token, "token_type": "Bearer"}
        if self.lifetime is not None:
            body["expires_in"] = self.lifetime
        return JSONResponse(body)

    async def reports(self, request: Request) -> Response:
        header = request.headers.get("authorization", "")
        if header.removeprefix("Bearer ") not in self.valid:
            return JSONResponse({"message": "token expired or unknown"}, status_code=401)
        return JSONResponse({"reports": 3, "token": header.removeprefix("Bearer ")})


SPEC = """
openapi: 3.0.3
info: {title: reports, version: "1"}
servers: [{url: "BASE/api"}]
components:
  securitySchemes:
    cc:
      type: oauth2
      flows: {clientCredentials: {tokenUrl: "BASE/oauth/token", scopes: {read: read reports}}}
security: [{cc: [read]}]
paths:
  /reports:
    get:
      operationId: listReports
      responses: {"200": {description: ok, content: {application/json: {schema: {type: object}}}}}
"""


@pytest.fixture
def server() -> Iterator[tuple[AuthServer, str]]:
    auth = AuthServer()
    with serve_app(auth.app) as base:
        yield auth, base


def source(
    base: str, tmp_path: Any, spec_text: str = SPEC, **auth: Any
) -> tuple[OpenAPISourceConfig, ToolRecord]:
    spec = tmp_path / "reports.yaml"
    spec.write_text(spec_text.replace("BASE", base), encoding="utf-8")
    settings = {
        "type": "oauth2",
        "token_url": f"{base}/oauth/token",
        "client_id_env": "CID",
        "client_secret_env": "CSECRET",
        **auth,
    }
    settings = {k: v for k, v in settings.items() if v is not None}
    config = OpenAPISourceConfig(name="reports", spec=str(spec), auth=settings, timeout_s=10)
    [tool], _ = OpenAPIBackend(config).load()
    return config, tool


@pytest.mark.anyio
async def test_one_token_serves_many_calls_and_a_revoked_one_is_replaced(
    server: tuple[AuthServer, str], tmp_path: Any
) -> None:
    auth, base = server
    config, tool = source(base, tmp_path, scopes=["read", "write"], token_params={"audience": "reports-api"})
    async with httpx.AsyncClient() as client:
        backend = OpenAPIBackend(config, client, environ=ENVIRON)
        answers = [await backend.call(tool, {}) for _ in range(3)]
        assert [a.structured_content for a in answers] == [{"reports": 3, "token": "tok-1"}] * 3
        [asked] = auth.token_requests
        assert asked["basic"] and asked["form"] == {
            "grant_type": "client_credentials",
            "scope": "read write",
            "audience": "reports-api",
        }
        auth.valid.clear()  # revoked before it expires: the API answers 401 once, the call still succeeds
        again = await backend.call(tool, {})
        assert again.structured_content == {"reports": 3, "token": "tok-2"}
        assert len(auth.token_requests) == 2


@pytest.mark.anyio
async def test_an_expiring_token_is_renewed_before_it_expires(
    server: tuple[AuthServer, str], tmp_path: Any
) -> None:
    auth, base = server
    auth.lifetime = 2  # renewed after half its life: 1 s
    config, tool = source(base, tmp_path, client_auth="post")
    async with httpx.AsyncClient() as client:
        backend = OpenAPIBackend(config, client, environ=ENVIRON)
        assert not (await backend.call(tool, {})).is_error
        assert not (await backend.call(tool, {})).is_error
        assert len(auth.token_requests) == 1
        await asyncio.sleep(1.1)
        renewed = await backend.call(tool, {})
    assert renewed.structured_content == {"reports": 3, "token": "tok-2"}
    first = auth.token_requests[0]
    assert not first["basic"] and first["form"]["client_secret"] == SECRET  # client_auth: post


@pytest.mark.anyio
async def test_calls_that_find_no_token_wait_for_one_request(
    server: tuple[AuthServer, str], tmp_path: Any
) -> None:
    auth, base = server
    auth.delay_s = 0.3
    config, tool = source(base, tmp_path)
    async with httpx.AsyncClient() as client:
        backend = OpenAPIBackend(config, client, environ=ENVIRON)
        answers = await asyncio.gather(*(backend.call(tool, {}) for _ in range(5)))
    assert all(not a.is_error for a in answers)
    assert len(auth.token_requests) == 1


@pytest.mark.anyio
async def test_a_refused_or_unreachable_endpoint_is_a_clear_error_without_the_secret(
    server: tuple[AuthServer, str], tmp_path: Any, caplog: pytest.LogCaptureFixture
) -> None:
    _, base = server
    config, tool = source(base, tmp_path)
    caplog.set_level(logging.DEBUG)
    async with httpx.AsyncClient() as client:
        refused = await OpenAPIBackend(config, client, environ={**ENVIRON, "CSECRET": "wrong-secret"}).call(
            tool, {}
        )
        assert refused.is_error
        text = text_part(refused)
        assert text.startswith("upstream_error: ")
        assert f"the token endpoint {base}/oauth/token answered HTTP 401: invalid_client, bad secret" in text
        assert config.auth is not None
        elsewhere = config.auth.model_copy(update={"token_url": f"http://127.0.0.1:{free_port()}/token"})
        nowhere = config.model_copy(update={"auth": elsewhere})
        unreachable = await OpenAPIBackend(nowhere, client, environ=ENVIRON).call(tool, {})
        assert "could not be reached: ConnectError" in text_part(unreachable)
        missing = await OpenAPIBackend(config, client, environ={"CID": CLIENT_ID}).call(tool, {})
        assert "environment variable CSECRET" in text_part(missing)
        assert not (await OpenAPIBackend(config, client, environ=ENVIRON).call(tool, {})).is_error
    said = caplog.text + text + text_part(unreachable)
    assert "wrong-secret" not in said and SECRET not in said and "tok-" not in said


@pytest.mark.anyio
async def test_without_a_token_url_the_specs_client_credentials_flow_is_asked(
    server: tuple[AuthServer, str], tmp_path: Any
) -> None:
    auth, base = server
    relative = SPEC.replace('tokenUrl: "BASE/oauth/token"', 'tokenUrl: "/oauth/token"')
    config, tool = source(base, tmp_path, relative, token_url=None)
    async with httpx.AsyncClient() as client:
        backend = OpenAPIBackend(config, client, environ=ENVIRON)
        backend.load()  # as the gateway does: the spec says where tokens come from
        answer = await backend.call(tool, {})
        assert answer.structured_content == {"reports": 3, "token": "tok-1"}
        assert len(auth.token_requests) == 1
        no_flow = SPEC.replace("clientCredentials", "authorizationCode")
        config, tool = source(base, tmp_path, no_flow, token_url=None)
        refused = await OpenAPIBackend(config, client, environ=ENVIRON).call(tool, {})
    assert "auth type oauth2 needs token_url (the spec declares no client-credentials flow)" in text_part(
        refused
    )
    assert len(auth.token_requests) == 1


def test_an_oauth2_source_needs_its_client() -> None:
    with pytest.raises(ValidationError, match="client_id_env, client_secret_env"):
        AuthConfig(type="oauth2")
    AuthConfig(
        type="oauth2", token_url="https://id.example.com/token", client_id_env="A", client_secret_env="B"
    )
