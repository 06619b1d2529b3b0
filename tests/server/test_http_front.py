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

from toolweave.server.fronts import handshake
from toolweave.server.fronts.front_answers import FrontPolicy, allowed_names, bind_now
from toolweave.server.fronts.http_front import HttpFront

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
