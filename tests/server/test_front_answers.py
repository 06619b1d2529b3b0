"""What the HTTP front answers before the MCP SDK is imported (``server/fronts/front_answers.py``): only
requests the full app would answer the same way without credentials; everything else is left to it (None)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from mcp.shared.inbound import ERROR_CODE_HTTP_STATUS
from mcp_types import METHOD_NOT_FOUND

from toolweave.server.fronts import handshake
from toolweave.server.fronts.front_answers import (
    MODERN_NOT_FOUND_STATUS,
    FrontPolicy,
    allowed_names,
    decide,
)

MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
}
HELLO = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
ACCEPT = [(b"accept", b"application/json, text/event-stream"), (b"content-type", b"application/json")]


def policy(host: str = "127.0.0.1", always_load: bool = True) -> FrontPolicy:
    hosts, origins = allowed_names(host, (), ())
    return FrontPolicy(always_load, hosts, origins, 1 << 20)


def scope(
    *headers: tuple[bytes, bytes], host: bytes = b"127.0.0.1:8765", path: str = "/mcp"
) -> dict[str, Any]:
    return {"type": "http", "method": "POST", "path": path, "headers": [(b"host", host), *ACCEPT, *headers]}


def modern(method: str, request_id: Any = 1, **params: Any) -> tuple[dict[str, Any], bytes]:
    headers = scope((b"mcp-protocol-version", b"2026-07-28"), (b"mcp-method", method.encode()))
    body = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": {"_meta": MODERN_META, **params}}
    return headers, json.dumps(body).encode()


def test_the_modern_not_found_status_is_the_sdks() -> None:
    assert ERROR_CODE_HTTP_STATUS[METHOD_NOT_FOUND] == MODERN_NOT_FOUND_STATUS


def test_handshake_era_initialize_then_its_session() -> None:
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": HELLO}).encode()
    first = decide(scope(), body, policy(), set())
    assert first is not None and first.session is not None and first.reply is not None
    assert first.reply["result"] == handshake.initialize_result("2025-06-18", handshake.server_version())
    session = (b"mcp-session-id", first.session.encode())
    listing = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}).encode()
    listed = decide(scope(session), listing, policy(always_load=False), {first.session})
    assert listed is not None and listed.reply == {"result": handshake.tools_list_result(False)}
    # a session the front did not begin is the SDK's to answer (or to refuse)
    assert decide(scope((b"mcp-session-id", b"other")), listing, policy(), {first.session}) is None
    note = json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}).encode()
    accepted = decide(scope(session), note, policy(), {first.session})
    assert accepted is not None and (accepted.status, accepted.reply) == (202, None)


def test_modern_era_discover_list_ping_and_listen() -> None:
    current = handshake.server_version()
    found = decide(*modern("server/discover"), policy(), set())
    assert found is not None and found.reply == {"result": handshake.discover_result(current)}
    listed = decide(*modern("tools/list"), policy(), set())
    assert listed is not None and listed.reply == {
        "result": handshake.modern_tools_list_result(True, current)
    }
    ping = decide(*modern("ping"), policy(), set())
    assert ping is not None and (ping.status, ping.replay) == (MODERN_NOT_FOUND_STATUS, False)
    listen = decide(
        *modern("subscriptions/listen", "l0", notifications={"toolsListChanged": True}), policy(), set()
    )
    assert listen is not None and listen.listen == handshake.listen_acknowledgement(
        "l0", {"notifications": {"toolsListChanged": True}}
    )


@pytest.mark.parametrize(
    "case",
    [
        "foreign host",
        "foreign origin",
        "no sse accept",
        "not json",
        "other path",
        "a call",
        "a cursor",
        "method header disagrees",
        "version header disagrees",
        "routing header twice",
    ],
)
def test_anything_else_is_left_to_the_full_app(case: str) -> None:
    headers, body = modern("tools/list")
    if case == "foreign host":
        headers = scope(host=b"evil.example:8765")
    elif case == "foreign origin":
        headers["headers"].append((b"origin", b"https://evil.example"))
    elif case == "no sse accept":
        headers["headers"] = [
            (k, b"application/json" if k == b"accept" else v) for k, v in headers["headers"]
        ]
    elif case == "not json":
        body = b"{not json"
    elif case == "other path":
        headers["path"] = "/mcp/other"
    elif case == "a call":
        headers, body = modern("tools/call", name="find_tools", arguments={"query": "x"})
    elif case == "a cursor":
        headers, body = modern("tools/list", cursor="2")
    elif case == "method header disagrees":
        headers, _ = modern("server/discover")
    elif case == "version header disagrees":
        headers["headers"] = [
            (k, b"2025-11-25" if k == b"mcp-protocol-version" else v) for k, v in headers["headers"]
        ]
    elif case == "routing header twice":
        headers["headers"].append((b"mcp-method", b"tools/list"))
    assert decide(headers, body, policy(), set()) is None
