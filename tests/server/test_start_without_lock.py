"""Start-up never waits for the writer lock ("Start without the lock", "No write without a
change"): a replica on an ``s3://`` registry (moto's server) whose Redis writer lock (a real
``redis-server``) is down serves ``find_tools`` from the last committed registry, and writes what its
manifest changed (its sources, shared with other replicas) once Redis is back, without a restart,
and applies its dependency overrides at once (they are its own view, never a write); a start on an
unchanged manifest commits nothing. In process, real LanceDB, embedder and MCP SDK client."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from tests.redis_server import RedisServer
from tests.s3 import MotoProcess, moto_bucket
from toolweave.manifest import load_manifest
from toolweave.registry import Registry
from toolweave.registry.embeddings import Embedder
from toolweave.server.gateway import Gateway
from toolweave.settings import Settings

from .helpers import FakeBackend, time_tools

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(600)]

HOME = "s3://registry/startlock"
QUERY = "what time is it in Tokyo"


@pytest.fixture
def s3(monkeypatch: pytest.MonkeyPatch, registry_lock: RedisServer) -> Iterator[dict[str, str]]:
    moto = MotoProcess()
    try:
        yield from moto_bucket(monkeypatch, server=moto)
    finally:
        moto.stop()


def manifest(path: Path, marker: str) -> Path:
    """A manifest serving ``clock`` (whose spec, shared with other replicas, holds ``marker``) with one
    dependency override."""
    path.write_text(
        "servers:\n"
        "  clock:\n"
        "    command: python\n"
        f"    args: [-c, {marker}]\n"
        "dependencies:\n"
        "  add:\n"
        "    - tool: clock__convert_time\n"
        "      depends_on: clock__get_current_time\n"
        "      reason: the manifest's own\n"
    )
    return path


def settings(s3: dict[str, str]) -> Settings:
    return Settings(home=HOME, registry_storage_options=s3, startup_call_wait_s=1.0)


def open_registry(s3: dict[str, str], embedder: Any) -> Registry:
    return Registry.open(settings=settings(s3), embedder=embedder)


def committed(s3: dict[str, str], embedder: Any) -> tuple[int, str]:
    """The registry's committed generation and the clock's shared spec, as a new reader sees them."""
    reader = open_registry(s3, embedder)
    try:
        assert not [e for e in reader.edges() if e.origin == "manifest"]  # a gateway's own, never stored
        specs = {s.name: s.spec for s in reader.source_specs()}
        return reader.loaded_generation, specs.get("clock", "")
    finally:
        reader.close()


def gateway(s3: dict[str, str], embedder: Any, path: Path) -> tuple[Gateway, FakeBackend]:
    clock = FakeBackend("clock", time_tools())
    loaded = load_manifest(path)
    opener = lambda: open_registry(s3, embedder)  # noqa: E731
    return Gateway(opener, [clock], settings(s3), manifest=loaded), clock


async def found(client: Client) -> list[str]:
    result = await client.call_tool("find_tools", {"query": QUERY})
    assert result.structured_content is not None, result
    return [t["name"] for t in result.structured_content.get("tools", [])]


async def test_a_replica_started_with_redis_down_serves_and_writes_once_it_is_back(
    s3: dict[str, str], registry_lock: RedisServer, shared_embedder: Embedder, tmp_path: Path
) -> None:
    await start_once(s3, shared_embedder, manifest(tmp_path / "gw.yaml", "seeded"))
    generation, spec = committed(s3, shared_embedder)
    assert "seeded" in spec
    registry_lock.kill()  # Redis is down when the replica starts, with a manifest that changed
    gw, _ = gateway(s3, shared_embedder, manifest(tmp_path / "gw.yaml", "changed-while-Redis-was-down"))
    async with Client(gw.server, mode="legacy") as client:
        with anyio.fail_after(120):  # before: "still starting" for 600 s, then `unavailable` for good
            while "clock__get_current_time" not in await found(client):
                await anyio.sleep(0.2)
            # the manifest's overrides need no lock: they are this gateway's view, not a write
            while not gw.sources.registry.dependencies("clock__convert_time"):
                await anyio.sleep(0.2)
        [own] = gw.sources.registry.dependencies("clock__convert_time")
        assert own.origin == "manifest" and own.reason == "the manifest's own"
        assert gw.served.is_ready() and gw.served.error is None
        called = await client.call_tool("clock__get_current_time", {"timezone": "Asia/Tokyo"})
        assert not called.is_error, called
        assert committed(s3, shared_embedder) == (generation, spec)  # nothing written meanwhile
        registry_lock.start()  # Redis is back (same port): the manifest's change commits, no restart
        with anyio.fail_after(180):
            while "changed-while-Redis-was-down" not in committed(s3, shared_embedder)[1]:
                await anyio.sleep(1.0)
        assert "clock__get_current_time" in await found(client)


async def start_once(s3: dict[str, str], embedder: Any, path: Path) -> None:
    """One gateway start, until it served a find_tools and its start-up writes are done."""
    gw, _ = gateway(s3, embedder, path)
    async with Client(gw.server, mode="legacy") as client:
        with anyio.fail_after(120):
            while "clock__get_current_time" not in await found(client):
                await anyio.sleep(0.2)
            await gw.warmed.wait()
            while gw.settle_error is not None or not gw.sources.registry.source_specs():
                await anyio.sleep(0.1)


async def test_restarts_on_an_unchanged_manifest_commit_nothing(
    s3: dict[str, str], shared_embedder: Embedder, tmp_path: Path
) -> None:
    path = manifest(tmp_path / "gw.yaml", "unchanged")
    await start_once(s3, shared_embedder, path)  # records the manifest's sources for other replicas
    before = committed(s3, shared_embedder)
    for _ in range(3):
        await start_once(s3, shared_embedder, path)
    assert committed(s3, shared_embedder) == before  # before: one new version per start
