"""Hostile or careless input is refused with one clear line, in bounded time and memory: YAML alias
bombs (manifest and OpenAPI spec), oversized documents, huge queries, oversized or malformed inbound
JSON-RPC (stdio lines, HTTP bodies), blank queries, an empty manifest."""

from __future__ import annotations

import io
import json
import logging
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import Client
from starlette.types import Receive, Scope, Send

from tests.faults.conftest import error_code, until
from tests.results import text_part
from toolweave.adapters.openapi.loader import parse_document
from toolweave.errors import ConfigError, OpenAPISpecError
from toolweave.manifest import load_manifest
from toolweave.server.fronts.limits import RequestSizeLimit, bounded_stdio_server
from toolweave.server.gateway import Gateway
from toolweave.server.turns.meta_tools import find_tools_result
from toolweave.settings import Settings
from toolweave.yaml_limits import expansion_problem, size_problem

pytestmark = pytest.mark.anyio


def billion_laughs(levels: int = 9) -> str:
    lines = ['l0: &l0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    lines += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 10)}]" for i in range(1, levels + 1)]
    return "\n".join(lines) + "\n"


def test_billion_laughs_manifest_is_one_line_config_error(tmp_path: Path) -> None:
    path = tmp_path / "laughs.yaml"
    path.write_text("servers: {}\n" + billion_laughs().replace("l", "x-l", 0))
    with pytest.raises(ConfigError) as caught:
        load_manifest(path)
    message = str(caught.value)
    assert "\n" not in message and str(path) in message
    assert "expand to more than" in message


def test_billion_laughs_spec_is_one_line_spec_error() -> None:
    spec = "openapi: 3.0.0\ninfo: {title: t, version: '1'}\npaths: {}\n" + billion_laughs()
    with pytest.raises(OpenAPISpecError) as caught:
        parse_document(spec, "laughs.yaml")
    assert "\n" not in str(caught.value) and "expand to more than" in str(caught.value)


def test_recursive_alias_is_refused() -> None:
    with pytest.raises(OpenAPISpecError, match="recursive YAML aliases"):
        parse_document("a: &x [1, *x]\n", "loop.yaml")


def test_ordinary_aliases_still_load() -> None:
    assert parse_document("a: &a [1, 2]\nb: *a\nc: {<<: {k: v}}\n", "ok.yaml") == {
        "a": [1, 2],
        "b": [1, 2],
        "c": {"k": "v"},
    }
    assert expansion_problem(None) is None


def test_oversized_documents_are_refused(tmp_path: Path) -> None:
    assert size_problem("x" * 11, limit=10) is not None and size_problem("x" * 10, limit=10) is None
    path = tmp_path / "big.yaml"
    path.write_text("servers: {}\n" + "#" * (5 * 1024 * 1024) + "\n")
    with pytest.raises(ConfigError, match="larger than"):
        load_manifest(path)


def test_find_tools_echoes_only_a_short_prefix_of_the_query() -> None:
    query = "q" * 1_000_000
    result = find_tools_result(query, [], list_changed=False, published=[], detail=True)
    assert result.structured_content is not None
    echoed = result.structured_content["query"]
    assert echoed.startswith("qqq") and len(echoed) < 300 and "1,000,000 characters" in echoed
    assert len(text_part(result)) < 1000
    short = find_tools_result("what time is it", [], list_changed=False, published=[], detail=True)
    assert short.structured_content["query"] == "what time is it"


async def test_stdio_replies_to_malformed_and_oversized_lines_and_lives_on() -> None:
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    lines = [
        b"this is not json",
        json.dumps({"jsonrpc": "2.0", "id": 7, "bogus": True}).encode(),
        b'{"jsonrpc":"2.0","id":8,"method":"x","params":"' + b"a" * 100_000 + b'"}',
        json.dumps(initialize).encode(),
    ]
    stdin = io.BytesIO(b"\n".join(lines) + b"\n")
    stdout = io.BytesIO()
    received: list[Any] = []
    async with bounded_stdio_server(70_000, stdin=stdin, stdout=stdout) as (read, _write):
        async for item in read:
            received.append(item)
        await until(lambda: stdout.getvalue().count(b"\n") >= 3, timeout=10)
        replies = [json.loads(line) for line in stdout.getvalue().splitlines()]
    assert [r["id"] for r in replies] == [None, 7, 8]
    assert [r["error"]["code"] for r in replies] == [-32700, -32600, -32600]
    assert "max_request_bytes" in replies[2]["error"]["message"]
    # The valid message after them still reaches the server.
    assert [m.message.method for m in received] == ["ping"]


async def _echo_app(scope: Scope, receive: Receive, send: Send) -> None:
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": str(len(body)).encode()})


async def test_http_bodies_over_the_limit_get_413_with_a_json_rpc_error() -> None:
    app = RequestSizeLimit(_echo_app, max_bytes=1000)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as http:
        ok = await http.post("/mcp", content=b"x" * 1000)
        assert (ok.status_code, ok.text) == (200, "1000")

        declared = await http.post("/mcp", content=b"x" * 5000)
        assert declared.status_code == 413
        assert declared.json()["error"]["code"] == -32600
        assert "max_request_bytes" in declared.json()["error"]["message"]

        async def chunks() -> Any:  # no Content-Length: counted while it streams in
            for _ in range(10):
                yield b"y" * 300

        streamed = await http.post("/mcp", content=chunks())
        assert streamed.status_code == 413 and streamed.json()["jsonrpc"] == "2.0"


async def test_blank_query_unknown_tool_and_empty_manifest(
    tmp_path: Path, registry: Any, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "empty.yaml"
    path.write_text("servers: {}\n")
    gateway = Gateway(registry, [], Settings(home=registry.path), manifest=load_manifest(path))
    with caplog.at_level(logging.WARNING):
        async with Client(gateway.server, mode="legacy") as client:
            blank = await client.call_tool("find_tools", {"query": "   "})
            assert error_code(blank) == "invalid_arguments"
            unknown = await client.call_tool("call_tool", {"name": "nope__nothing", "arguments": {}})
            assert error_code(unknown) == "unknown_tool"
            with anyio.fail_after(5):
                found = await client.call_tool("find_tools", {"query": "anything"})
            assert not found.is_error
    assert any("defines no upstreams" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("kind", ["http", "sse"])
async def test_gateway_http_apps_enforce_max_request_bytes(registry: Any, kind: str) -> None:
    from toolweave.server.fronts.transports import http_app, sse_app

    gateway = Gateway(registry, [], Settings(home=registry.path, max_request_bytes=70_000))
    app = http_app(gateway) if kind == "http" else sse_app(gateway)
    path = "/mcp" if kind == "http" else "/messages/?session_id=x"
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8765") as http:
        refused = await http.post(path, content=b"{" + b" " * 100_000 + b"}")
    assert refused.status_code == 413
    assert refused.json()["error"]["code"] == -32600


def test_a_binary_manifest_is_one_line_config_error(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from toolweave.cli import app

    path = tmp_path / "fleet.yaml"
    path.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)))
    with pytest.raises(ConfigError) as caught:
        load_manifest(path)
    assert "\n" not in str(caught.value) and str(path) in str(caught.value)
    done = CliRunner().invoke(app, ["serve", "--manifest", str(path)])
    assert done.exit_code == 1 and "Traceback" not in done.output
    assert "not UTF-8 text" in done.output


async def test_a_deeply_nested_http_body_gets_a_parse_error_not_a_500(registry: Any) -> None:
    from toolweave.server.fronts.transports import http_app

    gateway = Gateway(registry, [], Settings(home=registry.path))
    transport = httpx.ASGITransport(app=http_app(gateway))
    deep = (
        b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": '
        + b"[" * 10_000
        + b"]" * 10_000
        + b"}"
    )
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8765") as http:
        refused = await http.post("/mcp", content=deep, headers={"content-type": "application/json"})
    assert refused.status_code == 400
    assert refused.json()["error"]["code"] == -32700


async def test_a_huge_unknown_tool_name_is_echoed_capped_with_its_length(registry: Any) -> None:
    gateway = Gateway(registry, [], Settings(home=registry.path))
    name = "x" * 200_000
    async with Client(gateway.server, mode="legacy") as client:
        unknown = await client.call_tool("call_tool", {"name": name, "arguments": {}})
    assert error_code(unknown) == "unknown_tool"
    text = json.dumps(unknown.structured_content) + "".join(getattr(c, "text", "") for c in unknown.content)
    assert len(text) < 2_000 and "(200,000 characters)" in text
