"""The HTTP front in-process: it serves the socket bound before it (a request sent before it may answer
waits, never refused), answers once offered a policy, and gives the port back when the command serves
without it (``release``). The hand-over to the full app is tested end to end
(tests/e2e/test_http_front_e2e.py)."""

from __future__ import annotations

import http.client
import json
import socket
import threading
from typing import Any

from toolweave.server.fronts import handshake
from toolweave.server.fronts.front_answers import FrontPolicy, allowed_names, bind_now
from toolweave.server.fronts.http_front import HttpFront

HELLO = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}


def post(port: int, body: dict[str, Any], out: list[Any]) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
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
