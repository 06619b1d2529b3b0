"""Loopback ports for the benchmark runners that start a gateway of their own (one copy for all)."""

from __future__ import annotations

import socket
import subprocess
import time
from typing import Any


def free_port() -> int:
    """A port nothing listens on now (the OS picks it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_port(port: int, proc: subprocess.Popen[Any], timeout: float = 120) -> None:
    """Poll until something accepts connections on ``port``; fail early if ``proc`` exits first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"gateway exited with {proc.returncode} before listening on {port}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise TimeoutError(f"the gateway did not listen on 127.0.0.1:{port} within {timeout} s")
