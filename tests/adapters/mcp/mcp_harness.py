"""Test helpers for the MCP upstream adapter: real upstream processes and a harness around ``run``."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import anyio

from tests.net import free_port, wait_port
from toolweave.adapters.mcp import MCPBackend
from toolweave.records import DependencyEdge, ToolRecord

UPSTREAMS = Path(__file__).resolve().parents[2] / "upstreams"
DYNAMIC = str(UPSTREAMS / "dynamic.py")
SILENT = str(UPSTREAMS / "silent.py")


@dataclass
class Harness:
    """Records what a running backend reports; ``wait`` polls a condition with a deadline."""

    backend: MCPBackend
    reports: list[list[ToolRecord]] = field(default_factory=list)
    statuses: list[bool] = field(default_factory=list)

    async def on_tools(
        self, source: str, tools: Sequence[ToolRecord], edges: Sequence[DependencyEdge]
    ) -> None:
        assert source == self.backend.name
        self.reports.append(list(tools))

    async def on_status(self, source: str, available: bool) -> None:
        assert source == self.backend.name
        self.statuses.append(available)

    @property
    def names(self) -> list[str]:
        return [t.name for t in self.reports[-1]] if self.reports else []

    def tool(self, name: str) -> ToolRecord:
        return next(t for t in self.reports[-1] if t.name == name)

    async def wait(self, cond: Callable[[], bool], timeout: float = 15.0, what: str = "condition") -> None:
        with anyio.fail_after(timeout):
            while not cond():
                await anyio.sleep(0.05)


@asynccontextmanager
async def running(backend: MCPBackend) -> AsyncIterator[Harness]:
    harness = Harness(backend)
    backend.on_status = harness.on_status
    async with anyio.create_task_group() as tg:
        tg.start_soon(backend.run, harness.on_tools)
        try:
            yield harness
        finally:
            tg.cancel_scope.cancel()


class HttpUpstream:
    """tests/upstreams/dynamic.py served over HTTP by uvicorn in a subprocess; can be killed and restarted."""

    def __init__(self, mode: str = "http", env: dict[str, str] | None = None) -> None:
        self.mode = mode
        self.env = env
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/{'mcp' if self.mode == 'http' else 'sse'}"

    def start(self) -> None:
        env = {**os.environ, **self.env} if self.env else None
        self.proc = subprocess.Popen([sys.executable, DYNAMIC, self.mode, str(self.port)], env=env)
        wait_port(self.port, self.proc)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
