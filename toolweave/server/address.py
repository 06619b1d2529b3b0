"""Where ``toolweave serve`` listens over HTTP/SSE, and the early bind: standard ``socket`` only.

``toolweave.__main__`` binds the port before it imports anything else of toolweave's (the HTTP front, the
settings, the SDK): until then a client's connection is refused, and each import before the bind made
that window longer (0.1-1.3 s on a busy machine). ``server/front_answers.py`` re-exports these.
"""

from __future__ import annotations

import socket

__all__ = ["DEFAULT_HOST", "DEFAULT_PORT", "bind_now"]

DEFAULT_HOST = "127.0.0.1"
"""Where ``toolweave serve`` listens over HTTP/SSE unless told otherwise: loopback, so only this machine."""

DEFAULT_PORT = 8765


def bind_now(host: str, port: int) -> socket.socket | None:
    """A socket bound to ``host:port`` and listening, or None when that fails (the command then reports
    it as it always did). ``toolweave.__main__`` binds it before importing anything heavier than this."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listening = socket.socket(family, socket.SOCK_STREAM)
    try:
        listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listening.bind((host, port))
        listening.listen(2048)
    except OSError:
        listening.close()
        return None
    return listening
