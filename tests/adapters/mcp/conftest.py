"""Fixtures for the MCP upstream adapter tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.adapters.mcp.mcp_harness import HttpUpstream


@pytest.fixture
def http_upstream() -> Iterator[HttpUpstream]:
    up = HttpUpstream("http", env={"REQUIRE_BEARER": "t0ken"})
    up.start()
    try:
        yield up
    finally:
        up.kill()


@pytest.fixture
def sse_upstream() -> Iterator[HttpUpstream]:
    up = HttpUpstream("sse")
    up.start()
    try:
        yield up
    finally:
        up.kill()
