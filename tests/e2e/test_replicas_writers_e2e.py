"""Writers under contention on one `s3://` registry (moto's S3 server, a real `redis-server` as the lock),
with the default coordination settings: two `toolweave serve` replicas recording usage examples from
calls (flushed every 2 s, so their writes collide with everything else) while two `toolweave
ingest-catalog` processes write a large and a small catalog. Every ingest commits, or fails with one
clean line and its retry commits; afterwards the committed registry holds every tool once, every
declared edge, no edge naming a missing tool, and every usage example the calls taught.
docs/registry.md, "Writers".

The large catalog has ``TOOLWEAVE_WRITERS_BIG`` tools (default 600 for the suite; the issue's check
is 10,000: ``TOOLWEAVE_WRITERS_BIG=10000 pytest -m replicas tests/e2e/test_replicas_writers_e2e.py``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from mcp import Client

from tests.redis_server import RedisServer
from tests.s3 import MotoS3, moto_bucket

from .conftest import TOOLWEAVE
from .test_replicas_e2e import Replica, catalog, found, manifest, poll_async, serving

pytestmark = [pytest.mark.integration, pytest.mark.anyio, pytest.mark.replicas]

moto_server = pytest.importorskip(
    "moto.server", reason="moto[server] is not installed (pip install -e '.[dev]'): no S3-compatible server"
)
REGISTRY = "s3://registry/replicas"
BIG = int(os.environ.get("TOOLWEAVE_WRITERS_BIG", "600"))
SMALL = 200
CALLS = 12
"""Distinct requests per replica (both call one tool: 2 x 12 stays under the 32 examples kept per tool)."""
RETRIES = 5


@pytest.fixture
def s3(monkeypatch: pytest.MonkeyPatch, registry_lock: RedisServer) -> Iterator[dict[str, str]]:
    yield from moto_bucket(monkeypatch, server=MotoS3())


def ingest(path: Path, source: str, s3: dict[str, str], log: Path) -> subprocess.Popen[str]:
    env = dict(os.environ, TOOLWEAVE_REGISTRY_STORAGE_OPTIONS=json.dumps(s3))
    with log.open("ab") as err:  # the child keeps its own handle
        return subprocess.Popen(
            [
                TOOLWEAVE,
                "ingest-catalog",
                str(path),
                "--source",
                source,
                "--registry",
                REGISTRY,
                "--serve",
                "--json",
            ],
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
            env=env,
        )


def ingest_until_committed(
    path: Path, source: str, s3: dict[str, str], log: Path
) -> tuple[int, dict[str, int]]:
    """Run the CLI ingest, retrying a failure (which must be one clean line); (attempts, summary)."""
    for attempt in range(1, RETRIES + 1):
        before = log.read_text(errors="replace") if log.exists() else ""
        proc = ingest(path, source, s3, log)
        out, _ = proc.communicate(timeout=1800)
        if proc.returncode == 0:
            return attempt, json.loads(out.strip().splitlines()[-1])
        said = log.read_text(errors="replace")[len(before) :]
        assert "Traceback" not in said, said[-3000:]
        assert "error:" in said.lower(), said[-3000:]  # the one-line message of a failed command
    raise AssertionError(f"{source}: no commit after {RETRIES} attempts:\n{log.read_text()[-3000:]}")


async def call_repeatedly(replica: Replica, label: str, queries: list[str]) -> None:
    """One client session per request pair: find_tools with the request, then the call it leads to."""
    for query in queries:
        async with Client(replica.url, mode="legacy") as client:
            found_tools = await client.call_tool("find_tools", {"query": query})
            assert not found_tools.is_error, found_tools
            result = await client.call_tool("call_tool", {"name": "dyn__echo", "arguments": {"text": label}})
            assert not result.is_error, result
        await anyio.sleep(0.5)


def stop_gracefully(replica: Replica) -> None:
    """SIGTERM: the replica writes its buffered usage examples (waiting for the lock) before it exits."""
    replica.proc.terminate()
    replica.proc.wait(120)


@pytest.mark.timeout(1800)  # a busy 2-core machine embeds the large catalog for minutes
async def test_four_writers_on_one_s3_registry_commit_whole_and_lose_nothing(
    s3: dict[str, str], tmp_path: Path
) -> None:
    big = catalog(tmp_path / "big.jsonl", "big", BIG)
    small = catalog(tmp_path / "small.jsonl", "small", SMALL)
    replicas = [
        Replica(
            manifest(
                tmp_path / f"{name}.yaml",
                {f"cat_{name}": catalog(tmp_path / f"{name}.jsonl", name, 6)},
                upstream=True,
            ),
            s3,
            tmp_path / f"{name}.log",
            TOOLWEAVE_USAGE_FLUSH_S="2",  # a flush every 2 s: the replicas' writes collide with the ingests
        )
        for name in ("alpha", "beta")
    ]
    with serving(*replicas):
        for replica in replicas:
            replica.wait_up()

        for replica in replicas:

            async def ready(replica: Replica = replica) -> bool:
                return "dyn__echo" in await found(replica, "echo the text back")

            await poll_async(ready, "the replica serves its upstream")

        queries = {
            # words, not numbers: numbers users type are stored as <number>
            name: [f"echo back the {name} greeting {chr(ord('a') + n) * 3} please" for n in range(CALLS)]
            for name in ("alpha", "beta")
        }
        results: dict[str, tuple[int, dict[str, int]]] = {}

        def run_ingest(path: Path, source: str) -> None:
            results[source] = ingest_until_committed(path, source, s3, tmp_path / f"ingest-{source}.log")

        started = time.monotonic()
        async with anyio.create_task_group() as group:
            group.start_soon(anyio.to_thread.run_sync, run_ingest, big, "big")
            group.start_soon(anyio.to_thread.run_sync, run_ingest, small, "small")
            for replica, name in zip(replicas, ("alpha", "beta"), strict=True):
                group.start_soon(call_repeatedly, replica, name, queries[name])
        sys.stderr.write(f"4 writers done in {time.monotonic() - started:.0f} s: {results}\n")
        assert results["big"][1]["added"] + results["big"][1]["unchanged"] == BIG
        assert results["small"][1]["added"] + results["small"][1]["unchanged"] == SMALL

        # a replica serves the CLI's catalogs (shared with --serve) within a poll
        async def big_found() -> bool:
            return "big__big_op7" in await found(replicas[0], "operation 7 of the big service")

        await poll_async(big_found, "the replica serves the catalog ingested by the CLI")
        for replica in replicas:
            stop_gracefully(replica)
            assert "Traceback" not in replica.logs()

    from toolweave.registry import Registry
    from toolweave.settings import Settings

    registry = Registry.open(settings=Settings(home=REGISTRY, registry_storage_options=s3))
    rows = Counter(registry._state.table.lance.to_arrow().column("id").to_pylist())  # the committed version
    assert set(rows.values()) == {1}, [i for i, n in rows.items() if n > 1][:10]  # no duplicate rows
    expected = {f"{s}__{s}_op{n}" for s, count in (("big", BIG), ("small", SMALL)) for n in range(count)}
    expected |= {f"cat_{s}__{s}_op{n}" for s in ("alpha", "beta") for n in range(6)}
    assert expected <= set(rows), sorted(expected - set(rows))[:10]  # no lost rows
    ids = set(rows)
    dangling = [e for e in registry.edges() if e.tool not in ids or e.depends_on not in ids]
    assert dangling == []
    declared = {(e.tool, e.depends_on) for e in registry.edges() if e.origin == "declared"}
    for source, count in (("big", BIG), ("small", SMALL)):
        assert {(f"{source}__{source}_op{n}", f"{source}__{source}_op0") for n in range(1, count)} <= declared
    taught = {e.query for e in registry._usage.by_tool.get("dyn__echo", []) if e.origin == "call"}
    assert {q for qs in queries.values() for q in qs} <= taught  # every call's example was committed
