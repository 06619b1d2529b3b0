"""The HTTP front in-process: it serves the socket bound before it (a request sent before it may answer
waits, never refused), answers once offered a policy, and gives the port back when the command serves
without it (``release``). The hand-over to the full app is tested end to end
(tests/e2e/test_http_front_e2e.py)."""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import threading
from typing import Any

import anyio
import pytest

from toolweave.server.fronts import handshake
from toolweave.server.fronts.front_answers import FrontPolicy, allowed_names, bind_now
from toolweave.server.fronts.http_front import HttpFront
from toolweave.server.turns import ready_index

HELLO = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}


def post(port: int, body: dict[str, Any], out: list[Any], session: str | None = None) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    if session is not None:
        headers["Mcp-Session-Id"] = session
    conn.request("POST", "/mcp", json.dumps(body), headers)
    response = conn.getresponse()
    out.append((response.status, response.getheader("mcp-session-id"), json.loads(response.read())))
    conn.close()


def test_a_request_sent_before_the_policy_is_answered_once_it_comes_and_release_frees_the_port() -> None:
    listening = bind_now("127.0.0.1", 0)
    assert listening is not None
    port = listening.getsockname()[1]
    front = HttpFront(listening)
    answers: list[Any] = []
    sender = threading.Thread(
        target=post,
        args=(port, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": HELLO}, answers),
    )
    sender.start()  # before the front even runs: the connection waits in the backlog
    front.start()
    assert front.usable()
    sender.join(0.5)
    assert not answers  # nothing is answered before the settings say what may be (authentication)
    hosts, origins = allowed_names("127.0.0.1", (), ())
    front.offer(FrontPolicy(True, hosts, origins, 1 << 20))
    sender.join(60)
    status, session, reply = answers[0]
    assert status == 200 and session
    assert reply["result"] == handshake.initialize_result("2025-11-25", handshake.server_version())
    front.release()
    with socket.socket() as again:  # the port is free for the command's own server
        again.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        again.bind(("127.0.0.1", port))


def test_a_find_tools_the_gateway_has_not_taken_within_its_bound_is_answered_as_still_starting() -> None:
    """No ready table, no gateway yet (its SDK still importing on a busy machine): a plain find_tools is
    answered as still starting once ``starting_wait_s`` passed since it came, within a client's timeout
    (the OpenAI Agents SDK's 5 s), and the model calls again; other calls keep waiting for the gateway."""
    from toolweave.server.fronts.early import STILL_STARTING

    listening = bind_now("127.0.0.1", 0)
    assert listening is not None
    port = listening.getsockname()[1]
    front = HttpFront(listening)
    front.start()
    assert front.usable()
    hosts, origins = allowed_names("127.0.0.1", (), ())
    front.offer(FrontPolicy(True, hosts, origins, 1 << 20, starting_wait_s=0.2))
    answers: list[Any] = []
    post(port, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": HELLO}, answers)
    session = answers[0][1]
    find = {"name": "find_tools", "arguments": {"query": "time in Tokyo"}}
    other = {"name": "call_tool", "arguments": {"name": "time__get_current_time", "arguments": {}}}
    found: list[Any] = []
    waiting: list[Any] = []
    sender = threading.Thread(
        target=post,
        args=(port, {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": find}, found, session),
    )

    def post_until_released(*args: Any) -> None:
        with contextlib.suppress(Exception):  # answered by nobody: the front is released at the end
            post(*args)

    kept = threading.Thread(
        target=post_until_released,
        args=(port, {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": other}, waiting, session),
        daemon=True,
    )
    sender.start()
    kept.start()
    sender.join(60)
    status, _, reply = found[0]
    assert status == 200 and reply["id"] == 2
    assert reply["result"]["structuredContent"] == {
        "tools": [],
        "tool_list_changed": False,
        "note": STILL_STARTING,
    }
    assert json.loads(reply["result"]["content"][0]["text"]) == reply["result"]["structuredContent"]
    kept.join(0.5)
    assert not waiting  # a proxied call is never dropped: it may have side effects
    assert front._answered[-1].method == "initialize"  # the still-starting answer is not replayed
    front.release()


def serving_front(ready: ready_index.ReadyIndex) -> tuple[HttpFront, str]:
    listening = bind_now("127.0.0.1", 0)
    assert listening is not None
    front = HttpFront(listening)
    front.start()
    assert front.usable()
    hosts, origins = allowed_names("127.0.0.1", (), ())
    front.offer(FrontPolicy(True, hosts, origins, 1 << 20, ready=ready))
    return front, f"http://127.0.0.1:{front.port}/mcp"


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_the_front_shows_what_its_find_tools_offered_to_that_client_only(mode: str) -> None:
    """No gateway behind the front (its SDK is still loading): a real SDK client's ``find_tools`` answered
    from the ready table says ``tool_list_changed``, the client hears ``list_changed`` where its era
    carries it (on the answer's own response; on its listen stream in the 2026 era) and its next list
    carries the tool. Another client, meanwhile, still lists the meta-tools only."""
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp_types import Implementation

    from tests.e2e.watch import ListChanged, watching

    from .test_ready_index import QUERY, TABLE

    front, url = serving_front(ready_index.ReadyIndex(TABLE))
    watch = ListChanged()
    try:
        with anyio.fail_after(60):
            async with (
                # no DELETE at the end: only the gateway would answer it
                Client(
                    streamable_http_client(url, terminate_on_close=False),
                    mode=mode,
                    message_handler=watch.on_message,
                ) as client,
                watching(client, watch),
                Client(
                    streamable_http_client(url, terminate_on_close=False),
                    mode=mode,
                    client_info=Implementation(name="another-app", version="1"),
                ) as other,
            ):
                assert (client.protocol_version == "2026-07-28") == (mode == "auto")
                assert [t.name for t in (await client.list_tools(cache_mode="bypass")).tools] == META
                found = await client.call_tool("find_tools", {"query": QUERY})
                assert found.structured_content is not None
                offered = [t["name"] for t in found.structured_content["tools"]]
                assert offered[0] == "time__get_current_time"
                assert found.structured_content["tool_list_changed"] is True
                await watch.wait(30)  # from the front: nothing else is there to send it
                listed = (await client.list_tools(cache_mode="bypass")).tools
                assert [t.name for t in listed] == META + sorted(offered, key=[t.id for t in TABLE].index)
                assert listed[2].meta == handshake.ALWAYS_LOAD
                again = await client.call_tool("find_tools", {"query": QUERY})
                assert again.structured_content is not None
                assert again.structured_content["tool_list_changed"] is False  # nothing new to show
                assert [t.name for t in (await other.list_tools(cache_mode="bypass")).tools] == META
                assert watch.count == 1
    finally:
        front.release()


META = ["find_tools", "call_tool"]


@pytest.mark.anyio
async def test_a_2026_era_answer_that_offers_tools_waits_for_the_clients_re_list() -> None:
    """Claude Code sends its next model request as soon as it has a ``find_tools`` answer, with the tools
    it listed by then: an answer the front gives from the ready table that offers tools is announced on
    the client's listen stream first and held until that client's next ``tools/list`` was answered
    (``FrontPolicy.relist_wait_s``), as the gateway holds its own."""
    import dataclasses

    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    from tests.e2e.watch import ListChanged, watching

    from .test_ready_index import QUERY, TABLE

    front, url = serving_front(ready_index.ReadyIndex(TABLE))
    assert front._policy is not None
    front.offer(dataclasses.replace(front._policy, relist_wait_s=600))  # only the re-list releases it
    watch = ListChanged()
    answered = anyio.Event()
    found: list[Any] = []
    try:
        with anyio.fail_after(60):
            async with (
                Client(streamable_http_client(url, terminate_on_close=False), mode="auto") as client,
                watching(client, watch),
                anyio.create_task_group() as tg,
            ):
                assert client.protocol_version == "2026-07-28"

                async def find() -> None:
                    found.append(await client.call_tool("find_tools", {"query": QUERY}))
                    answered.set()

                tg.start_soon(find)
                await watch.wait(30)
                with anyio.move_on_after(0.5):
                    await answered.wait()
                assert not answered.is_set()  # held: the client has not listed the tools yet
                listed = [t.name for t in (await client.list_tools(cache_mode="bypass")).tools]
                assert "time__get_current_time" in listed
                await answered.wait()
        assert found[0].structured_content["tool_list_changed"] is True
    finally:
        front.release()


def test_the_fronts_constants_are_the_gateways() -> None:
    """The front is standard library only: it keeps its own copies of the gateway's constants."""
    from toolweave.server.fronts import front_offers
    from toolweave.server.sessions.session_book import SESSION_META_KEY
    from toolweave.server.turns.notify import OTHER_CONNECTION_SETTLE_S

    assert front_offers.OTHER_CONNECTION_SETTLE_S == OTHER_CONNECTION_SETTLE_S
    assert front_offers.SESSION_META == SESSION_META_KEY
    from toolweave.server.fronts import early_turns
    from toolweave.settings import PublishSettings

    defaults = PublishSettings()
    assert defaults.relist_wait_ms / 1000 == early_turns.RELIST_WAIT_S
    assert defaults.relist_probe_ms / 1000 == early_turns.RELIST_PROBE_S
