"""Where ``toolweave serve`` listens over HTTP/SSE, and the early bind: standard ``socket`` only.

``toolweave.__main__`` binds the port before it imports anything else of toolweave's (the HTTP front, the
settings, the SDK): until then a client's connection is refused, and each import before the bind made
that window longer (0.1-1.3 s on a busy machine). ``server/fronts/front_answers.py`` re-exports these.

What is left of the window is the interpreter's own start (tens of ms on a quiet machine, up to a second
with every core busy): no process can bind a port before it runs. So the port can also come bound and
listening from whoever spawns the gateway, by systemd's socket-activation protocol (``inherited``: a
``.socket`` unit, ``systemd-socket-activate``, a test harness): connections made from the very instant
of spawn then wait in the backlog, none is refused.
"""

from __future__ import annotations

import os
import socket

__all__ = ["DEFAULT_HOST", "DEFAULT_PORT", "LISTEN_FDS_START", "bind_now", "inherited", "mismatch"]

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


LISTEN_FDS_START = 3
"""systemd's socket-activation protocol: the first passed descriptor (``sd_listen_fds(3)``)."""

_ACTIVATION_VARS = ("LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES")


def inherited() -> socket.socket | None:
    """The listening socket the spawning process passed (``LISTEN_FDS=1`` and ``LISTEN_PID`` naming
    this process), or None. ``LISTEN_PID`` must match: an upstream this gateway starts inherits its
    environment, and must not take the variables as meant for itself. They are removed once read, as
    ``sd_listen_fds(1)`` does, for the same reason."""
    if os.environ.get("LISTEN_PID") != str(os.getpid()) or os.environ.get("LISTEN_FDS") != "1":
        return None
    for name in _ACTIVATION_VARS:
        os.environ.pop(name, None)
    try:
        passed = socket.socket(fileno=LISTEN_FDS_START)
    except OSError:
        return None  # not a socket: the command binds its own port as usual
    if passed.type != socket.SOCK_STREAM:
        passed.close()
        return None
    return passed


def mismatch(passed: socket.socket, host: str, port: int) -> str | None:
    """Why ``passed`` is not the ``host:port`` the command line names, or None when it is. Every check
    (loopback or authentication, allowed Host names) reads ``--host``: serving a socket bound elsewhere
    would let a non-loopback socket pass for a loopback one."""
    bound_host, bound_port = passed.getsockname()[:2]
    try:
        same_host = _packed(bound_host) == _packed(host)
    except OSError:
        same_host = False
    if same_host and bound_port == port:
        return None
    shown = f"[{bound_host}]" if ":" in bound_host else bound_host
    return (
        f"the socket passed by socket activation listens on {shown}:{bound_port}, but the command line "
        f"asks for {host}:{port}: give serve the same --host and --port as the socket unit"
    )


def _packed(host: str) -> bytes:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    return socket.inet_pton(family, host)
