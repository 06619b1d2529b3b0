"""A real ``redis-server`` (Debian's) on a free 127.0.0.1 port and a temp dir, for session-store tests.

The tests kill and restart it to check that the gateway degrades to local state and reconnects; it
keeps no data across a restart (no RDB, no AOF), like a Redis that lost its memory.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.net import Pausable, free_port, wait_port

__all__ = ["RedisServer", "running_redis"]

PASSWORD = "s3cret-redis-pw"
"""The server requires it, so the tests also check it never reaches a log line."""


class RedisServer(Pausable):
    def __init__(self, binary: str, workdir: Path) -> None:
        self.binary = binary
        self.workdir = workdir
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://:{PASSWORD}@127.0.0.1:{self.port}/0"

    def start(self) -> None:
        log = (self.workdir / "redis.log").open("ab")
        with log:
            self.proc = subprocess.Popen(
                [
                    self.binary,
                    "--port", str(self.port),
                    "--bind", "127.0.0.1",
                    "--dir", str(self.workdir),
                    "--save", "",
                    "--appendonly", "no",
                    "--requirepass", PASSWORD,
                ],
                stdout=log,
                stderr=log,
            )  # fmt: skip
        wait_port(self.port, self.proc, timeout=20)

    def client(self):
        """A synchronous client for the test's own checks."""
        import redis

        return redis.Redis.from_url(self.url)


def running_redis(tmp_path: Path) -> Iterator[RedisServer]:
    """Body of a ``redis_server`` fixture: skips with a clear message when the binary is absent."""
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.skip("redis-server is not installed (Debian: apt-get install -y redis-server)")
    tmp_path.mkdir(parents=True, exist_ok=True)
    server = RedisServer(binary, tmp_path)
    server.start()
    try:
        yield server
    finally:
        server.kill()
