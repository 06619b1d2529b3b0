"""How sessions are recognised across requests in each protocol era (see docs/gateway.md)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import mcp_types as types
import pytest

from toolweave.server.sessions import SESSION_META_KEY, SessionStore, session_key

MODERN = "2026-07-28"


def ctx(version: str, connection: Any, meta: dict[str, Any] | None = None, host: str | None = None) -> Any:
    request = SimpleNamespace(client=SimpleNamespace(host=host)) if host else None
    return SimpleNamespace(
        protocol_version=version, session=SimpleNamespace(_connection=connection), meta=meta, request=request
    )


def connection(*, channel: bool = False, outbound: Any = None, client: str | None = None) -> Any:
    params = None
    if client:
        params = types.InitializeRequestParams(
            protocol_version=MODERN,
            capabilities=types.ClientCapabilities(),
            client_info=types.Implementation(name=client, version="2"),
        )
    return SimpleNamespace(state={}, has_standalone_channel=channel, outbound=outbound, client_params=params)


class Outbound:  # weak-referenceable, like the SDK's notify-only channel
    pass


def test_handshake_era_key_lives_in_the_connection_state() -> None:
    conn = connection()
    first = session_key(ctx("2025-11-25", conn))
    assert session_key(ctx("2025-11-25", conn)) == first
    assert session_key(ctx("2025-11-25", connection())) != first


def test_2026_duplex_stream_keyed_by_its_outbound_channel() -> None:
    shared = Outbound()
    a = session_key(ctx(MODERN, connection(channel=True, outbound=shared)))
    b = session_key(ctx(MODERN, connection(channel=True, outbound=shared)))  # a fresh Connection per request
    assert a == b
    assert session_key(ctx(MODERN, connection(channel=True, outbound=Outbound()))) != a


def test_2026_http_explicit_key_then_client_info_and_peer() -> None:
    explicit = session_key(ctx(MODERN, connection(client="vscode"), {SESSION_META_KEY: "tab-1"}, "10.0.0.1"))
    assert explicit == "client-tab-1"
    by_client = session_key(ctx(MODERN, connection(client="vscode"), None, "10.0.0.1"))
    assert by_client == "http-vscode/2@10.0.0.1"
    assert session_key(ctx(MODERN, connection(client="vscode"), None, "10.0.0.2")) != by_client
    assert session_key(ctx(MODERN, connection(), None, None)) == "http-anonymous@local"


@pytest.mark.anyio
async def test_unbound_sessions_are_capped_least_recently_seen_first() -> None:
    store = SessionStore(max_tools=5, pinned=(), max_sessions=2)
    for tab in ("a", "b", "a", "c"):
        await store.for_request(ctx(MODERN, connection(), {SESSION_META_KEY: tab}))
    assert store.get("client-b") is None
    assert store.get("client-a") is not None and store.get("client-c") is not None
