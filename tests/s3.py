"""moto's S3 server on 127.0.0.1 for tests of registries on ``s3://`` (skips when moto[server] is absent)."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

__all__ = ["moto_bucket"]


def moto_bucket(monkeypatch: pytest.MonkeyPatch, bucket: str = "registry") -> Iterator[dict[str, str]]:
    """A bucket on a fresh moto server; credentials in the environment, as LanceDB reads them. Yields
    the LanceDB storage options. Use it as the body of a fixture."""
    moto_server = pytest.importorskip(
        "moto.server",
        reason="moto[server] is not installed (pip install -e '.[dev]'): no S3-compatible server",
    )
    import boto3

    # werkzeug logs every S3 request at INFO: thousands of lines that bury a failing test's own report
    monkeypatch.setattr(logging.getLogger("werkzeug"), "level", logging.WARNING)
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        endpoint = f"http://{host}:{port}"
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test-key")
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test-secret")
        boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1").create_bucket(Bucket=bucket)
        yield {"aws_endpoint": endpoint, "aws_region": "us-east-1", "allow_http": "true"}
    finally:
        server.stop()
