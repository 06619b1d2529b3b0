"""Fixtures for the fault suite: a real registry, the gateway in process, and the faulty upstream
(``tests/upstreams/faulty.py``) over stdio or streamable HTTP."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client

from tests.net import free_port, wait_port
from tests.results import text_part
from toolweave.adapters.mcp import MCPBackend
from toolweave.adapters.mcp.config import HttpServer, StdioServer
from toolweave.registry import Registry
from toolweave.registry.embeddings import Embedder
from toolweave.server.gateway import Gateway
from toolweave.settings import Settings

FAULTY = str(Path(__file__).resolve().parents[1] / "upstreams" / "faulty.py")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/faults/" in str(item.fspath).replace(os.sep, "/"):
            item.add_marker(pytest.mark.faults)


async def until(cond: Callable[[], bool], timeout: float = 20.0) -> None:
    """Poll ``cond`` with a deadline (never a fixed sleep)."""
    with anyio.fail_after(timeout):
        while not cond():
            await anyio.sleep(0.05)


@dataclass
class Upstream:
    """The faulty upstream over one transport; HTTP runs as a subprocess the test can kill/restart."""

    transport: str
    extra_tools: Path
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None

    @property
    def env(self) -> dict[str, str]:
        return {"FAULTY_EXTRA_TOOLS": str(self.extra_tools)}

    def config(self) -> StdioServer | HttpServer:
        if self.transport == "stdio":
            return StdioServer(
                transport="stdio", command=sys.executable, args=[FAULTY, "stdio"], env=self.env
            )
        return HttpServer(transport="http", url=f"http://127.0.0.1:{self.port}/mcp")

    def start(self) -> None:
        if self.transport == "stdio":
            return  # the backend spawns (and respawns) it
        if self.proc is not None:
            self.proc.wait(10)  # the one that crashed: reaped here, not left running to the collector
        self.proc = subprocess.Popen(
            [sys.executable, FAULTY, "http", str(self.port)], env={**os.environ, **self.env}
        )
        wait_port(self.port, self.proc)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


@pytest.fixture(params=["stdio", "http"])
def upstream(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Upstream]:
    up = Upstream(request.param, tmp_path / "extra_tools.txt")
    up.start()
    try:
        yield up
    finally:
        up.stop()


@pytest.fixture
def registry(tmp_path: Path, shared_embedder: Embedder) -> Iterator[Registry]:
    home = tmp_path / "registry"
    reg = Registry.open(home, embedder=shared_embedder, settings=Settings(home=home))
    yield reg
    reg.close()


@dataclass
class Link:
    client: Client
    backend: MCPBackend
    statuses: list[bool]

    async def call(self, name: str, arguments: dict[str, Any] | None = None) -> types.CallToolResult:
        return await self.client.call_tool(name, arguments or {})


@asynccontextmanager
async def gateway_link(registry: Registry, upstream: Upstream, **backend_options: Any) -> AsyncIterator[Link]:
    """The gateway in process, one ``MCPBackend`` on ``upstream``, a handshake-era client on the gateway."""
    options: dict[str, Any] = {"connect_timeout_s": 10, "backoff_initial_s": 0.1, "backoff_max_s": 0.5}
    options.update(backend_options)
    backend = MCPBackend("faulty", upstream.config(), **options)
    # the gateway resolves every call's budget (``call_budget``): it gets the test's call timeout too
    budget = {"call_timeout_s": options["call_timeout_s"]} if "call_timeout_s" in options else {}
    settings = Settings(home=registry.path, connect_timeout_s=10, **budget)
    gateway = Gateway(registry, [backend], settings)
    statuses: list[bool] = []

    async def on_status(name: str, available: bool) -> None:
        statuses.append(available)
        await gateway.sources.backend_status(name, available)

    backend.on_status = on_status
    async with Client(gateway.server, mode="legacy") as client:
        await until(lambda: backend.available and registry.find("faulty__echo") is not None)
        yield Link(client, backend, statuses)


def error_code(result: types.CallToolResult) -> str:
    """The documented error code, checked in both places the gateway promises it."""
    assert result.is_error, result
    text = text_part(result)
    structured = result.structured_content or {}
    code = structured["error"]["code"]
    assert text.startswith(f"{code}: "), text
    return str(code)
