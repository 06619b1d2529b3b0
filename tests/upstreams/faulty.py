"""A deliberately misbehaving MCP upstream for toolweave's fault suite (raw JSON-RPC, no SDK: it starts
in ~50 ms and can break the protocol in ways an SDK server never would).

Handshake era only (protocol 2025-06-18); ``server/discover`` and unknown methods get -32601, so
clients fall back to ``initialize``. Tools:

* ``echo(text)`` → ``echo:<text>``;
* ``bad_utf8`` → an answer whose text carries raw invalid UTF-8 bytes inside a JSON string;
* ``garble`` → an answer broken by invalid UTF-8 outside any string (not JSON once decoded);
* ``noise(n)`` → ``n`` non-JSON lines on stdout (stdio) before the answer;
* ``storm(n)`` → ``n`` ``notifications/tools/list_changed`` before the answer;
* ``huge(mb)`` → an answer of ``mb`` MiB of text, written in pieces;
* ``hang`` → never answers this call;
* ``freeze(seconds)`` → stops answering anything (pings included) for that long;
* ``crash`` → the process exits in the middle of the call.

Tools named in the file ``$FAULTY_EXTRA_TOOLS`` (one per line, read at start) are listed too, so a
test can restart the upstream "with new tools". ``tools/list`` calls are counted in
``$FAULTY_LIST_COUNT`` (a file, rewritten on each call) when set.

Usage: python faulty.py stdio | http PORT
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

PROTOCOL = "2025-06-18"
BASE_TOOLS = ["echo", "bad_utf8", "garble", "noise", "storm", "huge", "hang", "freeze", "crash"]
LIST_CHANGED = b'{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}'
_frozen_until = 0.0
_lists = 0


def _tools() -> list[dict[str, Any]]:
    names = list(BASE_TOOLS)
    extra = os.environ.get("FAULTY_EXTRA_TOOLS")
    if extra and os.path.exists(extra):
        with open(extra) as f:
            names += [line.strip() for line in f if line.strip()]
    schema = {"type": "object", "properties": {"text": {"type": "string"}, "n": {"type": "integer"}}}
    return [{"name": n, "description": f"Fault tool {n}.", "inputSchema": schema} for n in names]


def _line(obj: dict[str, Any]) -> bytes:
    return json.dumps(obj).encode()


def _result(request_id: Any, result: dict[str, Any]) -> bytes:
    return _line({"jsonrpc": "2.0", "id": request_id, "result": result})


def _text(request_id: Any, text: str) -> bytes:
    return _result(request_id, {"content": [{"type": "text", "text": text}], "isError": False})


def handle(message: dict[str, Any], emit: Callable[[bytes], None]) -> Iterator[bytes]:
    """Yield the frames to send for one inbound message; ``emit`` sends raw stdout noise (stdio only)."""
    global _frozen_until, _lists
    while time.monotonic() < _frozen_until:
        time.sleep(0.05)
    method = message.get("method")
    request_id = message.get("id")
    if request_id is None:
        return  # a notification
    if method == "initialize":
        yield _result(
            request_id,
            {
                "protocolVersion": PROTOCOL,
                "capabilities": {"tools": {"listChanged": True}},
                "serverInfo": {"name": "faulty", "version": "1"},
            },
        )
    elif method == "ping":
        yield _result(request_id, {})
    elif method == "tools/list":
        _lists += 1
        if count_file := os.environ.get("FAULTY_LIST_COUNT"):
            with open(count_file, "w") as f:
                f.write(str(_lists))
        yield _result(request_id, {"tools": _tools()})
    elif method == "tools/call":
        yield from _call(request_id, message.get("params") or {}, emit)
    else:
        yield _line(
            {"jsonrpc": "2.0", "id": request_id, "error": {"code": -32601, "message": "Method not found"}}
        )


def _call(request_id: Any, params: dict[str, Any], emit: Callable[[bytes], None]) -> Iterator[bytes]:
    global _frozen_until
    name = params.get("name")
    args = params.get("arguments") or {}
    if name == "echo":
        yield _text(request_id, f"echo:{args.get('text', '')}")
    elif name == "bad_utf8":
        head = (
            f'{{"jsonrpc":"2.0","id":{json.dumps(request_id)},"result":{{"content":[{{"type":"text","text":"'
        )
        yield head.encode() + b"caf\xff\xfe!" + b'"}]}}'
    elif name == "garble":
        yield f'{{"jsonrpc":"2.0","id":{json.dumps(request_id)},"result":'.encode() + b"\xff\xfe\xfd}"
    elif name == "noise":
        for i in range(int(args.get("n", 150))):
            emit(f"debug line {i}: this is not JSON-RPC".encode())
        yield _text(request_id, "noisy")
    elif name == "storm":
        for _ in range(int(args.get("n", 500))):
            yield LIST_CHANGED
        yield _text(request_id, "stormed")
    elif name == "huge":
        size = int(float(args.get("n", 50)) * 1024 * 1024)
        head = (
            f'{{"jsonrpc":"2.0","id":{json.dumps(request_id)},"result":{{"content":[{{"type":"text","text":"'
        )
        piece = b"x" * (1024 * 1024)
        parts = [head.encode(), *([piece] * (size // len(piece))), b'"}],"isError":false}}']
        yield b"".join(parts) if size <= 8 * 1024 * 1024 else _Chunked(parts)
    elif name == "hang":
        time.sleep(3600)
    elif name == "freeze":
        _frozen_until = time.monotonic() + float(args.get("n", 30))
        while time.monotonic() < _frozen_until:
            time.sleep(0.05)
        yield _text(request_id, "thawed")
    elif name == "crash":
        os._exit(3)
    else:
        yield _text(request_id, f"{name} ran")


class _Chunked(bytes):
    """A frame too big to join: written piece by piece (the upstream's own memory is not under test)."""

    parts: list[bytes]

    def __new__(cls, parts: list[bytes]) -> _Chunked:
        obj = super().__new__(cls, b"")
        obj.parts = parts
        return obj


def _write(out: Any, frame: bytes) -> None:
    for part in getattr(frame, "parts", None) or [frame]:
        out.write(part)
    out.write(b"\n")
    out.flush()


def serve_stdio() -> None:
    out = sys.stdout.buffer
    lock = threading.Lock()

    def emit(raw: bytes) -> None:
        with lock:
            _write(out, raw)

    def work(message: dict[str, Any]) -> None:
        for frame in handle(message, emit):
            emit(frame)

    for raw in sys.stdin.buffer:
        try:
            message = json.loads(raw)
        except ValueError:
            continue
        # Calls run in threads so a hanging call does not block pings; `freeze` blocks everything.
        if message.get("method") == "tools/call" and (message.get("params") or {}).get("name") != "freeze":
            threading.Thread(target=work, args=(message,), daemon=True).start()
        else:
            work(message)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self.send_response(405)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_DELETE(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        message = json.loads(body)
        noise: list[bytes] = []
        frames = list(handle(message, noise.append))
        frames = noise + frames if frames else frames
        if not frames:
            self.send_response(202)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Mcp-Session-Id", "faulty-session")
        self.send_header("Connection", "close")
        self.end_headers()
        try:
            for frame in frames:
                self.wfile.write(b"event: message\ndata: ")
                _write(self.wfile, frame)
                self.wfile.write(b"\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass
        self.close_connection = True


def serve_http(port: int) -> None:
    ThreadingHTTPServer(("127.0.0.1", port), _Handler).serve_forever()


if __name__ == "__main__":
    if sys.argv[1] == "stdio":
        serve_stdio()
    else:
        serve_http(int(sys.argv[2]))
