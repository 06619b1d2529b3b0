"""How sessions are recognised across requests in each protocol era (see docs/gateway.md)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import mcp_types as types
import pytest

from toolweave.server.fronts.processes import ClientProcesses
from toolweave.server.sessions.session_book import SESSION_META_KEY, SessionStore, session_key

MODERN = "2026-07-28"


def ctx(
    version: str,
    connection: Any,
    meta: dict[str, Any] | None = None,
    host: str | None = None,
    port: int | None = None,
) -> Any:
    request = SimpleNamespace(client=SimpleNamespace(host=host, port=port)) if host else None
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


def test_2026_http_explicit_key_then_client_info_peer_and_process() -> None:
    explicit = session_key(ctx(MODERN, connection(client="vscode"), {SESSION_META_KEY: "tab-1"}, "10.0.0.1"))
    assert explicit == "client-tab-1"
    by_client = session_key(ctx(MODERN, connection(client="vscode"), None, "10.0.0.1", 5000))
    assert by_client.startswith("http-vscode/2@10.0.0.1#p")
    assert session_key(ctx(MODERN, connection(client="vscode"), None, "10.0.0.1", 5000)) == by_client
    assert session_key(ctx(MODERN, connection(client="vscode"), None, "10.0.0.2", 5000)) != by_client
    assert session_key(ctx(MODERN, connection(), None, None)).startswith("http-anonymous@local#p")
    assert session_key(ctx(MODERN, connection(client="vscode"), None, "10.0.0.1", 5001), "alice").startswith(
        "alice|http-vscode/2#p"
    )


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


APP = ("", "claude-code/2.1", "127.0.0.1")


def test_each_discover_begins_a_process_and_a_connection_stays_with_its_own() -> None:
    clock = Clock()
    processes = ClientProcesses(clock=clock)
    first = processes.discovered(APP, ("127.0.0.1", 1))
    assert processes.process_for(APP, ("127.0.0.1", 2)) is first  # a new connection of the only one
    second = processes.discovered(APP, ("127.0.0.1", 3))  # the next process
    assert second is not first
    assert processes.process_for(APP, ("127.0.0.1", 4)) is second
    clock.now += 1
    assert processes.process_for(APP, ("127.0.0.1", 2)) is first  # an open connection keeps its process
    assert processes.process_for(("", "other/1", "127.0.0.1"), ("127.0.0.1", 9)) not in (first, second)


def test_a_port_idle_past_the_keep_alive_names_no_connection_any_more() -> None:
    clock = Clock()
    processes = ClientProcesses(keep_alive_s=5, clock=clock)
    first = processes.discovered(APP, ("127.0.0.1", 1))
    processes.process_for(APP, ("127.0.0.1", 2))
    second = processes.discovered(APP, ("127.0.0.1", 3))
    clock.now += 6  # uvicorn closed port 2's connection: the port may be anyone's now
    assert processes.process_for(APP, ("127.0.0.1", 2)) is second
    # a connection in use never expires (a listen stream lasts as long as its process)
    processes.started(APP, ("127.0.0.1", 7), first)
    clock.now += 60
    assert processes.process_for(APP, ("127.0.0.1", 7)) is first


def test_while_another_process_runs_a_new_connection_is_nobody_elses() -> None:
    processes = ClientProcesses(clock=Clock())
    older = processes.discovered(APP, ("127.0.0.1", 1))
    processes.started(APP, ("127.0.0.1", 1), older)  # its listen stream, open
    newer = processes.discovered(APP, ("127.0.0.1", 2))
    unknown = processes.process_for(APP, ("127.0.0.1", 3))  # either one's: a process of its own
    assert unknown not in (older, newer)
    processes.finished(APP, ("127.0.0.1", 1), older)  # the older one left
    assert processes.process_for(APP, ("127.0.0.1", 4)) is newer


@pytest.mark.anyio
async def test_unbound_sessions_are_capped_least_recently_seen_first() -> None:
    store = SessionStore(max_tools=5, pinned=(), max_sessions=2)
    for tab in ("a", "b", "a", "c"):
        await store.for_request(ctx(MODERN, connection(), {SESSION_META_KEY: tab}))
    assert store.get("client-b") is None
    assert store.get("client-a") is not None and store.get("client-c") is not None
