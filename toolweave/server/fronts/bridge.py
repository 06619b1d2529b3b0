"""The stdio bridge: a stdio launch that found a shared gateway (``server/fronts/sharing.py``) relays its
client's JSON-RPC lines to it over streamable HTTP, and its answers back, instead of starting a gateway cold.

Standard library only, so a launch that attaches starts in the interpreter's own time. Each launch is its
own MCP session on the shared gateway (its own ``Mcp-Session-Id``, its own published tools), and
authenticates with the shared gateway's token like any HTTP client.

Handshake era only (``initialize`` first): a 2026-07-28 client's requests carry per-request headers
(``Mcp-Method``, ``Mcp-Name``, parameters) and cancel by closing their request; ``read_first`` hands
any other first line back and the launch starts its own gateway as before. Requests are posted each in
its own thread (answers may come in any order, a slow call does not hold a quick one); notifications
and replies to the server's own requests go in order; the session's GET stream carries what the
gateway sends unasked (``list_changed``, sampling requests). When stdin ends the session is deleted.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import sys
import threading
from typing import Any

from toolweave.server.fronts.sharing import Shared

__all__ = ["read_first", "run"]

_MAX_FIRST = 1 << 20
_TIMEOUT_S = 3600.0  # a tool call's own budget is the gateway's (call_timeout_s): this only ends hung sockets


def read_first(fd: int = 0) -> tuple[bytes, bool]:
    """Everything read from ``fd`` up to and including the first line, and whether that line is a
    handshake-era ``initialize`` (the bridge can relay it)."""
    data = b""
    while b"\n" not in data and len(data) < _MAX_FIRST:
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        data += chunk
    line = data.split(b"\n", 1)[0]
    try:
        message = json.loads(line)
    except ValueError:
        return data, False
    return data, isinstance(message, dict) and message.get("method") == "initialize"


class _Bridge:
    def __init__(self, shared: Shared) -> None:
        self._shared = shared
        self._session: str | None = None
        self._version: str | None = None
        self._out = threading.Lock()
        self._stream: threading.Thread | None = None

    def _headers(self) -> dict[str, str]:
        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "Authorization": f"Bearer {self._shared.token}",
        }
        if self._session is not None:
            headers["Mcp-Session-Id"] = self._session
        if self._version is not None:
            headers["MCP-Protocol-Version"] = self._version
        return headers

    def _connection(self) -> http.client.HTTPConnection:
        return http.client.HTTPConnection("127.0.0.1", self._shared.port, timeout=_TIMEOUT_S)

    def _write(self, message: bytes) -> None:
        with self._out:
            sys.stdout.buffer.write(message.rstrip(b"\n") + b"\n")
            sys.stdout.buffer.flush()

    def _relay(self, response: http.client.HTTPResponse) -> list[dict[str, Any]]:
        """Write every message of ``response`` (one JSON body, or an SSE stream) to stdout."""
        kind = (response.getheader("Content-Type") or "").split(";")[0].strip()
        written: list[dict[str, Any]] = []
        if kind == "application/json":
            body = response.read()
            if body.strip():
                self._write(body)
                with contextlib.suppress(ValueError):
                    written.append(json.loads(body))
            return written
        if kind != "text/event-stream":
            response.read()
            return written
        data: list[bytes] = []
        while line := response.readline():
            line = line.rstrip(b"\r\n")
            if line.startswith(b"data:"):
                data.append(line[5:].lstrip(b" "))
            elif not line and data:
                message = b"\n".join(data)
                data = []
                self._write(message)
                with contextlib.suppress(ValueError):
                    written.append(json.loads(message))
        return written

    def _error(self, rid: Any, text: str) -> None:
        error = {"jsonrpc": "2.0", "id": rid, "error": {"code": -32603, "message": text}}
        self._write(json.dumps(error).encode())

    def post(self, line: bytes, rid: Any) -> None:
        """POST one message and relay what comes back; a request that gets no answer gets an error."""
        conn = self._connection()
        try:
            conn.request("POST", "/mcp", line, self._headers())
            response = conn.getresponse()
            if response.status >= 400:
                body = response.read().decode(errors="replace")[:300]
                if rid is not None:
                    self._error(rid, f"shared gateway: HTTP {response.status}: {body}")
                return
            session = response.getheader("Mcp-Session-Id")
            if session and self._session is None:
                self._session = session
            for message in self._relay(response):
                result = message.get("result")
                if message.get("id") == rid and isinstance(result, dict) and "protocolVersion" in result:
                    self._version = str(result["protocolVersion"])
        except OSError as exc:
            sys.stderr.write(f"toolweave: the shared gateway did not answer: {exc}\n")
            if rid is not None:
                self._error(rid, f"the shared gateway did not answer: {exc}")
        finally:
            conn.close()

    def listen(self) -> None:
        """The session's GET stream: what the gateway sends unasked."""
        conn = self._connection()
        try:
            conn.request("GET", "/mcp", headers={**self._headers(), "Accept": "text/event-stream"})
            response = conn.getresponse()
            if response.status < 400:
                self._relay(response)
        except OSError:
            pass  # the session ended, or the gateway stopped: stdin's end or the next POST says so
        finally:
            conn.close()

    def close(self) -> None:
        if self._session is None:
            return
        conn = self._connection()
        with contextlib.suppress(OSError):
            conn.request("DELETE", "/mcp", headers=self._headers())
            conn.getresponse().read()
        conn.close()

    def handle(self, line: bytes) -> threading.Thread | None:
        try:
            message = json.loads(line)
        except ValueError:
            message = None
        is_request = isinstance(message, dict) and "method" in message and "id" in message
        rid = message.get("id") if isinstance(message, dict) else None
        if not is_request or (isinstance(message, dict) and message.get("method") == "initialize"):
            self.post(line, rid if is_request else None)  # in order: the session id, then everything else
            if isinstance(message, dict) and message.get("method") == "notifications/initialized":
                self._stream = threading.Thread(target=self.listen, daemon=True)
                self._stream.start()
            return None
        worker = threading.Thread(target=self.post, args=(line, rid), daemon=True)
        worker.start()
        return worker


def run(shared: Shared, first: bytes, fd: int = 0) -> int:
    """Bridge this process's stdio to ``shared`` until stdin ends (``first``: what ``read_first`` read)."""
    bridge = _Bridge(shared)
    pending = first
    workers: list[threading.Thread] = []
    while True:
        while (end := pending.find(b"\n")) >= 0:
            line, pending = pending[:end], pending[end + 1 :]
            if line.strip() and (worker := bridge.handle(line)) is not None:
                workers.append(worker)
        workers = [w for w in workers if w.is_alive()]
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        pending += chunk
    if pending.strip() and (worker := bridge.handle(pending)) is not None:
        workers.append(worker)
    for worker in workers:
        worker.join(1.0)  # answers already on their way still reach a client that reads past its EOF
    bridge.close()
    return 0
