"""moto's S3 server on 127.0.0.1 for tests of registries on ``s3://`` (skips when moto[server] is absent)."""

from __future__ import annotations

import logging
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from tests.net import Pausable

__all__ = ["MotoProcess", "MotoS3", "moto_bucket"]


class MotoS3:
    """moto's threaded S3 server, which a test can stop (connections refused) and start again on the
    same port. The buckets' contents live in this process's moto backends, so they survive a restart."""

    def __init__(self) -> None:
        self._module: Any = pytest.importorskip(
            "moto.server",
            reason="moto[server] is not installed (pip install -e '.[dev]'): no S3-compatible server",
        )
        self.port = 0
        self._server: Any = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        self._server = self._module.ThreadedMotoServer(ip_address="127.0.0.1", port=self.port, verbose=False)
        self._server.start()
        self.port = self._server.get_host_and_port()[1]

    def stop(self) -> None:
        if self._server is None:
            return
        self._server.stop()
        # moto's stop() leaves the socket listening (clients would hang, not fail): close it
        self._server._server.server_close()
        self._server = None


def moto_bucket(
    monkeypatch: pytest.MonkeyPatch, bucket: str = "registry", server: MotoS3 | MotoProcess | None = None
) -> Iterator[dict[str, str]]:
    """A bucket on a fresh moto server (or on ``server``, started here); credentials in the environment,
    as LanceDB reads them. Yields the LanceDB storage options. Use it as the body of a fixture."""
    server = server or MotoS3()
    import boto3

    # werkzeug logs every S3 request at INFO: thousands of lines that bury a failing test's own report
    monkeypatch.setattr(logging.getLogger("werkzeug"), "level", logging.WARNING)
    server.start()
    try:
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test-key")
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test-secret")
        boto3.client("s3", endpoint_url=server.endpoint, region_name="us-east-1").create_bucket(Bucket=bucket)
        yield {"aws_endpoint": server.endpoint, "aws_region": "us-east-1", "allow_http": "true"}
    finally:
        server.stop()


class MotoProcess(Pausable):
    """moto's S3 server as its own process, which a test can pause (SIGSTOP: connections are accepted
    and never answered, like a hung store) and resume; its buckets live in that process."""

    def __init__(self) -> None:
        pytest.importorskip(
            "moto.server",
            reason="moto[server] is not installed (pip install -e '.[dev]'): no S3-compatible server",
        )
        from tests.net import free_port

        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        from tests.net import wait_port

        self.proc = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_port(self.port, self.proc, timeout=60)

    def stop(self) -> None:
        self.kill()
        self.proc = None
