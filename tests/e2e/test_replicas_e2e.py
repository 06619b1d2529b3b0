"""Two `toolweave serve --transport http` replicas on one `s3://` registry (moto's S3 server on
127.0.0.1): an upstream added through one is found and called through the other; ingests running in
both at once leave one row per tool and a consistent graph; kill -9 of a replica in the middle of an
ingest loses nothing committed and the survivor keeps serving. docs/registry.md, "Replicas"."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from tests.net import free_port, wait_port
from tests.redis_server import RedisServer
from tests.s3 import MotoS3, moto_bucket
from toolweave.registry.embeddings import Embedder

from .conftest import TOOLWEAVE, UPSTREAMS, stop

pytestmark = [pytest.mark.integration, pytest.mark.anyio, pytest.mark.replicas]

moto_server = pytest.importorskip(
    "moto.server", reason="moto[server] is not installed (pip install -e '.[dev]'): no S3-compatible server"
)
REGISTRY = "s3://registry/replicas"
SECRET = "s3cr3t-token-value"
DEADLINE_S = 180.0  # generous: both replicas start, embed and poll on a busy 2-core machine


@pytest.fixture
def moto() -> MotoS3:
    return MotoS3()


@pytest.fixture
def s3(monkeypatch: pytest.MonkeyPatch, moto: MotoS3, registry_lock: RedisServer) -> Iterator[dict[str, str]]:
    """A bucket on moto's server, and a real redis-server as the writers' lock (in the environment)."""
    yield from moto_bucket(monkeypatch, server=moto)


BULK = 1500
"""Tools of the catalog a replica is killed while ingesting."""


def catalog(path: Path, prefix: str, count: int) -> Path:
    """A tools.jsonl catalog: ``count`` tools, each after the first depending on the first."""
    lines = [
        {
            "name": f"{prefix}_op{n}",
            "description": f"Operation {n} of the {prefix} service: handles {prefix} records number {n}.",
            **({"depends_on": [f"{prefix}_op0"]} if n else {}),
        }
        for n in range(count)
    ]
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n", encoding="utf-8")
    return path


def manifest(path: Path, catalogs: dict[str, Path], *, upstream: bool = False) -> Path:
    text = "publish:\n  max_tools: 12\n"
    if upstream:  # a stdio upstream whose env names a secret by ${VAR}: only the reference is shared
        text += (
            f"servers:\n  dyn:\n    command: {sys.executable}\n"
            f'    args: ["{UPSTREAMS / "dynamic.py"}", stdio]\n'
            "    env:\n      DYN_TOKEN: ${DYN_TOKEN}\n"
        )
    if catalogs:
        text += "catalogs:\n" + "".join(f"  - path: {p}\n    source: {s}\n" for s, p in catalogs.items())
    path.write_text(text, encoding="utf-8")
    return path


class Replica:
    def __init__(self, manifest: Path, s3: dict[str, str], log: Path, **extra_env: str) -> None:
        self.port = free_port()
        self.flags = ["--transport", "http", "--port", str(self.port)]
        self.log = log
        env = dict(os.environ)
        env.update(
            TOOLWEAVE_LOG_LEVEL="INFO",
            TOOLWEAVE_REGISTRY_STORAGE_OPTIONS=json.dumps(s3),
            TOOLWEAVE_REGISTRY_LOCK_TTL_S="10",  # a killed writer holds the registry this long at most
            DYN_TOKEN=SECRET,
        )
        env.update(extra_env)
        with log.open("wb") as err:
            self.proc = subprocess.Popen(
                [TOOLWEAVE, "serve", "--manifest", str(manifest), "--registry", REGISTRY, *self.flags],
                stdout=subprocess.DEVNULL,
                stderr=err,
                env=env,
            )

    def wait_up(self) -> None:
        try:
            wait_port(self.port, self.proc, timeout=60)
        except Exception:
            raise RuntimeError(f"replica did not start:\n{self.logs()}") from None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def logs(self) -> str:
        return self.log.read_text(errors="replace")


@contextmanager
def serving(*replicas: Replica) -> Iterator[None]:
    """Stop the replicas after the block; when it fails, their logs go with the test's report."""
    try:
        yield
    except BaseException:
        for replica in replicas:
            sys.stderr.write(f"--- {replica.log.name} ---\n{replica.logs()[-6000:]}\n")
        raise
    finally:
        for replica in replicas:
            stop(replica.proc)


def poll(check: Callable[[], Any], what: str, deadline_s: float = DEADLINE_S) -> Any:
    end = time.monotonic() + deadline_s
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > end:
            raise AssertionError(f"not within {deadline_s:.0f} s: {what}")
        time.sleep(0.2)


async def found(replica: Replica, query: str) -> list[str]:
    async with Client(replica.url, mode="legacy") as client:
        result = await client.call_tool("find_tools", {"query": query})
        assert result.structured_content is not None, result
        # an error answer (the registry still opening) finds nothing yet
        return [t["name"] for t in result.structured_content.get("tools", [])]


async def poll_async(check: Callable[[], Any], what: str, deadline_s: float = DEADLINE_S) -> Any:
    import anyio

    end = time.monotonic() + deadline_s
    while True:
        result = await check()
        if result:
            return result
        if time.monotonic() > end:
            raise AssertionError(f"not within {deadline_s:.0f} s: {what}")
        await anyio.sleep(0.2)


def open_registry(s3: dict[str, str]) -> Any:
    from toolweave.registry import Registry
    from toolweave.settings import Settings

    return Registry.open(settings=Settings(home=REGISTRY, registry_storage_options=s3))


def rows_per_tool(s3: dict[str, str]) -> Counter[str]:
    import lancedb

    registry = open_registry(s3)
    name = registry._state.db.head.tools_table
    table = lancedb.connect(REGISTRY, storage_options=s3).open_table(name)
    return Counter(table.to_arrow().column("id").to_pylist())


async def test_an_upstream_added_through_one_replica_is_found_and_called_through_the_other(
    s3: dict[str, str], tmp_path: Path
) -> None:
    shared = catalog(tmp_path / "shared.jsonl", "shared", 8)
    first = Replica(
        manifest(
            tmp_path / "a.yaml",
            {"cat_a": catalog(tmp_path / "a.jsonl", "alpha", 8), "shared": shared},
            upstream=True,
        ),
        s3,
        tmp_path / "a.log",
    )
    second = Replica(
        manifest(tmp_path / "b.yaml", {"cat_b": catalog(tmp_path / "b.jsonl", "beta", 8), "shared": shared}),
        s3,
        tmp_path / "b.log",
    )
    with serving(first, second):
        first.wait_up()
        second.wait_up()

        async def echo_found() -> bool:
            return "dyn__echo" in await found(second, "echo the text back")

        await poll_async(echo_found, "the second replica finds dyn__echo")
        async with Client(second.url, mode="legacy") as client:
            result = await client.call_tool("call_tool", {"name": "dyn__echo", "arguments": {"text": "hi"}})
            assert not result.is_error, result
            assert "hi" in "".join(getattr(c, "text", "") for c in result.content)

        # the second replica's own catalog reaches the first by the first's next poll (not at once: the
        # second may still be ingesting it, or have committed it a moment ago)
        async def beta_found() -> bool:
            return "cat_b__beta_op3" in await found(first, "operation 3 of the beta service")

        await poll_async(beta_found, "the first replica finds cat_b__beta_op3")

        # both ingested `shared` at start (concurrently): one row per tool, a consistent graph
        rows = rows_per_tool(s3)
        assert set(rows.values()) == {1}, rows
        expected = {
            f"{s}__{p}_op{n}"
            for s, p in (("cat_a", "alpha"), ("cat_b", "beta"), ("shared", "shared"))
            for n in range(8)
        }
        assert expected <= set(rows)
        registry = open_registry(s3)
        assert all(registry.find(e.tool) and registry.find(e.depends_on) for e in registry.edges())
        for source, prefix in (("cat_a", "alpha"), ("cat_b", "beta"), ("shared", "shared")):
            assert {
                (e.tool, e.depends_on)
                for e in registry.edges()
                if e.origin == "declared" and e.tool.startswith(source)
            } == {(f"{source}__{prefix}_op{n}", f"{source}__{prefix}_op0") for n in range(1, 8)}
        # the upstream's spec is shared with its ${VAR} reference, never the value
        specs = {s.name: s.spec for s in registry.source_specs()}
        assert "${DYN_TOKEN}" in specs["dyn"] and SECRET not in json.dumps(specs)
        assert first.proc.poll() is None and second.proc.poll() is None


async def test_kill_9_of_a_replica_mid_ingest_loses_nothing_committed(
    s3: dict[str, str], tmp_path: Path, registry_lock: RedisServer
) -> None:
    base = catalog(tmp_path / "base.jsonl", "base", 6)
    survivor = Replica(manifest(tmp_path / "s.yaml", {"base": base}), s3, tmp_path / "s.log")
    survivor.wait_up()
    with serving(survivor):

        async def base_found() -> bool:
            return "base__base_op2" in await found(survivor, "operation 2 of the base service")

        await poll_async(base_found, "the survivor serves its catalog")
        # Large enough that its ingest holds the lock for seconds on a quiet machine too (embedding
        # dominates: ~6 s per 1,000 tools here); 300 tools took about as long as the check below.
        victim = Replica(
            manifest(tmp_path / "v.yaml", {"bulk": catalog(tmp_path / "bulk.jsonl", "bulk", BULK)}),
            s3,
            tmp_path / "v.log",
        )
        with serving(victim):  # stopped even when the check fails
            held: list[bool] = []

            def ingesting() -> bool:  # the lock held across two looks: the bulk ingest's write, not a blip
                # (an ingest embeds before it takes the lock, which it then holds to write and commit)
                held.append(bool(registry_lock.client().keys("toolweave:registry:*:writer")))
                return held[-2:] == [True] * 2

            poll(ingesting, "the victim takes the writer lock to ingest")
            victim.proc.send_signal(signal.SIGKILL)
            victim.proc.wait(10)

        assert "base__base_op2" in await found(survivor, "operation 2 of the base service")
        async with Client(survivor.url, mode="legacy") as client:
            listed = await client.list_tools()
            assert {"find_tools", "call_tool"} <= {t.name for t in listed.tools}
        registry = open_registry(s3)  # once the dead lease expired: its leftovers are rolled back
        bulk = [t for t in registry.tools() if t.source == "bulk"]
        assert len(bulk) in (0, BULK)  # never half an ingest
        assert {f"base__base_op{n}" for n in range(6)} <= {t.id for t in registry.tools()}
        rows = rows_per_tool(s3)
        assert set(rows.values()) == {1}
        assert survivor.proc.poll() is None


async def called(replica: Replica, text: str) -> str:
    async with Client(replica.url, mode="legacy") as client:
        result = await client.call_tool("call_tool", {"name": "dyn__echo", "arguments": {"text": text}})
        assert not result.is_error, result
        return "".join(getattr(c, "text", "") for c in result.content)


def base_replica(tmp_path: Path, s3: dict[str, str], *, upstream: bool = True, **env: str) -> Replica:
    """A started replica serving a six-tool catalog `base` (and the dyn upstream), polling every 0.5 s."""
    replica = Replica(
        manifest(
            tmp_path / "a.yaml", {"base": catalog(tmp_path / "base.jsonl", "base", 6)}, upstream=upstream
        ),
        s3,
        tmp_path / "a.log",
        TOOLWEAVE_REGISTRY_POLL_S="0.5",
        **env,
    )
    replica.wait_up()
    return replica


async def serves_base(replica: Replica) -> bool:
    return "base__base_op2" in await found(replica, "operation 2 of the base service")


async def test_a_replica_serves_its_snapshot_while_the_object_store_is_down_and_follows_it_again(
    s3: dict[str, str], moto: MotoS3, tmp_path: Path, shared_embedder: Embedder
) -> None:
    replica = base_replica(tmp_path, s3)
    with serving(replica):

        async def ready() -> bool:
            return {"base__base_op2", "dyn__echo"} <= set(
                await found(replica, "operation 2 of the base service")
                + await found(replica, "echo the text back")
            )

        await poll_async(ready, "the replica serves its catalog and its upstream")

        moto.stop()  # the object store is down: connections to it are refused
        assert "base__base_op2" in await found(replica, "operation 2 of the base service")
        assert "down" in await called(replica, "down")
        poll(
            lambda: "could not check the registry for newer versions" in replica.logs(),
            "the replica logs its failed poll",
        )
        assert "base__base_op4" in await found(replica, "operation 4 of the base service")
        assert replica.proc.poll() is None

        moto.start()  # back on the same port, with the same buckets
        from toolweave.records import ToolRecord
        from toolweave.registry import Registry
        from toolweave.registry.sources import SourceSpec
        from toolweave.settings import Settings

        writer = Registry.open(
            settings=Settings(home=REGISTRY, registry_storage_options=s3), embedder=shared_embedder
        )
        try:
            late = ToolRecord(
                id="late__pay_invoice",
                source="late",
                name="pay_invoice",
                description="Pay a supplier invoice.",
            )
            writer.ingest("late", [late])
            writer.set_source_specs([SourceSpec("late", "catalog", "{}")])  # shared, as a replica's catalog
        finally:
            writer.close()

        async def late_found() -> bool:
            return "late__pay_invoice" in await found(replica, "pay the supplier's invoice")

        await poll_async(late_found, "the replica picks up a version committed after the outage", 30)
        assert "back" in await called(replica, "back")
        logs = replica.logs()
        assert logs.count("could not check the registry for newer versions") == 1  # once per outage
        assert "the registry can be checked again" in logs
        assert (
            "full-text search failed, vector search only" in logs and "full-text search works again" in logs
        )
