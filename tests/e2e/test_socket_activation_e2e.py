"""Socket activation: ``toolweave serve --transport http`` serves the listening socket the process that
spawned it passed (systemd's protocol, ``server/fronts/address.py``), so a client that connects the instant
the gateway is spawned is queued, never refused, and its first ``find_tools`` is answered. The socket must be
the ``--host``/``--port`` the command names (every loopback and authentication check reads those), and a
non-loopback one without authentication is refused as a bound one is.
"""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.net import listening_socket, spawn_activated

from .conftest import TOOLWEAVE, gateway_env, stop
from .test_http_front_e2e import ACCEPT, TIME_TOOL, TOKYO

pytestmark = [pytest.mark.integration]

HELLO = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}


def serve_args(manifest: Path, registry: Path, *extra: str) -> list[str]:
    serve = [TOOLWEAVE, "serve", "--manifest", str(manifest), "--registry", str(registry)]
    return [*serve, "--transport", "http", *extra]


def post(url: str, body: dict[str, Any], headers: dict[str, str]) -> httpx.Response:
    return httpx.post(url, json=body, headers=headers, timeout=120)


def test_a_connection_made_at_spawn_is_queued_not_refused_and_answered(
    time_manifest: Path, registry_copy: Path, tmp_path: Path
) -> None:
    listening = listening_socket()
    port = listening.getsockname()[1]
    args = serve_args(time_manifest, registry_copy, "--port", str(port))
    with (tmp_path / "gateway.log").open("wb") as err:
        proc = spawn_activated(listening, args, stdout=subprocess.DEVNULL, stderr=err, env=gateway_env())
    listening.close()  # the gateway holds it now: a socket left here would accept nothing
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            pass  # right after spawn: without the passed socket, this is refused
        url = f"http://127.0.0.1:{port}/mcp"
        init = post(url, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": HELLO}, ACCEPT)
        assert init.status_code == 200, init.text
        session = {"Mcp-Session-Id": init.headers["mcp-session-id"], **ACCEPT}
        post(url, {"jsonrpc": "2.0", "method": "notifications/initialized"}, session)
        call = {"name": "find_tools", "arguments": {"query": TOKYO}}
        found = post(url, {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call}, session)
        assert found.status_code == 200, found.text
        assert TIME_TOOL in found.text
    finally:
        stop(proc)
    assert "LISTEN_FDS" not in (tmp_path / "gateway.log").read_text(errors="replace")


def test_a_passed_socket_on_another_address_than_the_command_names_is_refused(
    time_manifest: Path, registry_copy: Path
) -> None:
    listening = listening_socket()
    port = listening.getsockname()[1]
    args = serve_args(time_manifest, registry_copy, "--port", str(port + 1))
    proc = spawn_activated(listening, args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    listening.close()
    try:
        _, err = proc.communicate(timeout=120)
    finally:
        stop(proc)
    assert proc.returncode == 2
    assert f"listens on 127.0.0.1:{port}" in err.decode() and f"asks for 127.0.0.1:{port + 1}" in err.decode()


def test_a_passed_non_loopback_socket_without_authentication_is_refused(
    time_manifest: Path, registry_copy: Path
) -> None:
    listening = listening_socket("0.0.0.0")
    port = listening.getsockname()[1]
    args = serve_args(time_manifest, registry_copy, "--host", "0.0.0.0", "--port", str(port))
    proc = spawn_activated(listening, args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    listening.close()
    try:
        answered = None
        with pytest.raises(httpx.HTTPError):  # nothing answers: the front never offers, the command exits
            answered = post(
                f"http://127.0.0.1:{port}/mcp",
                {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": HELLO},
                ACCEPT,
            )
        assert answered is None
        _, err = proc.communicate(timeout=120)
    finally:
        stop(proc)
    assert proc.returncode == 1
    assert "refusing to listen on 0.0.0.0 without authentication" in err.decode()
