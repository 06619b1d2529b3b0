"""Loopback helpers shared by every test that starts a real server: a free port, and waiting for it."""

from __future__ import annotations

import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["Pausable", "free_port", "listening_socket", "serve_app", "spawn_activated", "wait_port"]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_port(port: int, proc: subprocess.Popen[Any] | None = None, timeout: float = 30.0) -> None:
    """Poll until something accepts connections on ``port``; fail early if ``proc`` exits first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"process exited with {proc.returncode} before listening on {port}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise TimeoutError(f"nothing listening on 127.0.0.1:{port} after {timeout} s")


@contextmanager
def serve_app(app: Any) -> Iterator[str]:
    """The ASGI ``app`` served by uvicorn in a thread on a free port of 127.0.0.1: its base URL."""
    import uvicorn

    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=free_port(),
        log_level="warning",
        lifespan="off",
        timeout_graceful_shutdown=2,
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the test server did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{config.port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def listening_socket(host: str = "127.0.0.1") -> socket.socket:
    """A socket bound to a free port on ``host`` and listening: what a service manager passes by
    socket activation."""
    listening = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    listening.bind((host, 0))
    listening.listen(128)
    return listening


def spawn_activated(listening: socket.socket, args: list[str], **popen: Any) -> subprocess.Popen[Any]:
    """Start ``args`` as systemd's socket activation would: ``listening`` as descriptor 3,
    ``LISTEN_FDS=1`` and ``LISTEN_PID`` naming the process itself (the shell's pid, kept by ``exec``;
    bash, as dash takes single-digit descriptors only)."""
    fd = listening.fileno()
    script = f'LISTEN_PID=$$ LISTEN_FDS=1 exec "$@" 3<&{fd}'
    return subprocess.Popen(["/bin/bash", "-c", script, "bash", *args], pass_fds=(fd,), **popen)


class Pausable:
    """A server process a test can pause (SIGSTOP: connections are accepted and never answered, like a
    hung server), resume, and kill (resumed first, so that it can die)."""

    proc: subprocess.Popen[Any] | None = None

    def pause(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGCONT)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.kill()
            self.proc.wait(10)
