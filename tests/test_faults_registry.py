"""kill -9 at random points of `toolweave ingest-catalog` and `toolweave reindex`: after every kill the
registry opens with exactly the last committed state or the new one (rows, edges, search results).

Each run is a real process running the real CLI, killed with SIGKILL. The processes are forked from
a multiprocessing fork server that has imported toolweave once: a fresh interpreter costs seconds of
imports per kill point, which would make the loop too slow to run in the default suite.
Half the kill points are uniform over a whole run, half over its write phase (from the first file the
run writes to its end), where a crash can do harm. The default suite (CI) runs a bounded loop: 4 kill
points per command, the same kinds of kill point. The long loop runs apart with ``pytest -m kill9``;
its number of kill points per command is ``TOOLWEAVE_FAULT_KILLS`` (default 20).
"""

from __future__ import annotations

import json
import multiprocessing
import os
import random
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from toolweave.registry import Embedder, Registry
from toolweave.retrieval import retrieve_tools

pytestmark = [pytest.mark.integration, pytest.mark.faults]

KILLS = int(os.environ.get("TOOLWEAVE_FAULT_KILLS", "20"))
CI_KILLS = 4
"""Kill points per command in the default suite: two uniform over a run, two in its write phase."""
N_TOOLS = 100
QUERIES = ("convert the invoice currency", "schedule a meeting with a customer", "resize an image file")
_VERBS = ("get", "create", "update", "delete", "list", "search", "convert", "schedule", "resize", "send")
_NOUNS = (
    "invoice",
    "customer",
    "meeting",
    "image",
    "order",
    "ticket",
    "report",
    "playlist",
    "currency",
    "file",
)

State = tuple[frozenset[tuple[str, str]], frozenset[str], tuple[tuple[str, ...], ...]]


def write_catalog(path: Path, version: str) -> Path:
    """A generated catalog with declared edges; version "b" changes a third of the descriptions,
    drops the last ten tools and rewires the edges."""
    count = N_TOOLS - (10 if version == "b" else 0)
    lines = []
    for i in range(count):
        verb, noun, other = _VERBS[i % 10], _NOUNS[(i // 10) % 10], _NOUNS[(i * 7 + 3) % 10]
        description = f"{verb.capitalize()} a {noun} record, given the {other} it belongs to (variant {i})."
        if version == "b" and i % 3 == 0:
            description += f" Also returns the {other} history."
        target = (i // 2) if version == "a" else (i - 1)
        depends = [f"{_VERBS[target % 10]}_{_NOUNS[(target // 10) % 10]}_{target}"] if i else []
        lines.append(
            json.dumps({"name": f"{verb}_{noun}_{i}", "description": description, "depends_on": depends})
        )
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


def read_state(path: Path, embedder: Embedder) -> State:
    reg = Registry.open(path, embedder=embedder)
    try:
        rows = frozenset((t.id, t.content_hash) for t in reg.tools())
        edges = frozenset(e.model_dump_json() for e in reg.edges())
        found = tuple(tuple(r.tool_id for r in retrieve_tools(reg, q)[:5]) for q in QUERIES)
        return rows, edges, found
    finally:
        reg.close()


def _run_cli(argv: list[str]) -> None:
    """The child: the real CLI, output discarded."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    from toolweave.cli import app

    app(argv, standalone_mode=False)


def _files(directory: Path) -> set[str]:
    return {os.path.join(root, f) for root, _dirs, files in os.walk(directory) for f in files}


class Runner:
    """Starts CLI runs from the fork server and kills them at a chosen point."""

    def __init__(self, registry: Path) -> None:
        self.registry = registry
        self.ctx = multiprocessing.get_context("forkserver")
        self.ctx.set_forkserver_preload(
            ["toolweave.cli", "toolweave.commands", "toolweave.registry", "lancedb"]
        )
        self.killed = 0

    def run(
        self, argv: list[str], *, kill_after: float | None = None, from_first_write: bool = False
    ) -> float:
        """Run to the end or SIGKILL it ``kill_after`` s after start (or after its first write).
        Returns the seconds from start (or first write) to the end; ``self.killed`` counts kills."""
        before = _files(self.registry)
        proc = self.ctx.Process(target=_run_cli, args=(argv,))
        start = time.monotonic()
        proc.start()
        if from_first_write:
            deadline = start + 300
            while _files(self.registry) == before and proc.is_alive():
                assert time.monotonic() < deadline, "the run never wrote anything"
                time.sleep(0.003)
            start = time.monotonic()
        proc.join(timeout=kill_after)
        if proc.pid is not None and proc.is_alive():
            # ``Process.kill``: the run may end between the check and the signal (a busy machine did),
            # and it then signals nothing rather than failing on the pid that is gone
            proc.kill()
            proc.join()
            self.killed += proc.exitcode == -signal.SIGKILL
        assert proc.exitcode in (0, -signal.SIGKILL), f"{argv} failed with exit code {proc.exitcode}"
        return time.monotonic() - start

    def write_phase(self, argv: list[str]) -> float:
        return self.run(argv, from_first_write=True)


def kill_loop(
    runner: Runner,
    argv_for: Callable[[State], list[str]],
    expected: Callable[[State], set[State]],
    embedder: Embedder,
    whole: float,
    writing: float,
    rng: random.Random,
    kills: int,
) -> tuple[State, int]:
    """``kills`` killed runs; after each, the registry opens in an allowed state. Returns the last state
    and how many runs had completed their commit when killed (landed on the new state)."""
    state = read_state(runner.registry, embedder)
    committed_new = 0
    for n in range(kills):
        from_first_write = n % 2 == 1
        point = rng.uniform(0, writing if from_first_write else whole)
        argv = argv_for(state)
        allowed = expected(state)
        runner.run(argv, kill_after=point, from_first_write=from_first_write)
        after = read_state(runner.registry, embedder)
        assert after in allowed, (
            f"kill {n} at {point:.3f} s {'into the write phase' if from_first_write else 'after start'} of "
            f"{argv[0]}: {len(after[0])} rows, {len(after[1])} edges, matching no committed state"
        )
        committed_new += after != state
        # progress for `pytest -s -m kill9` (where each kill landed)
        print(
            f"{argv[0]} kill {n}: {point:.3f} s {'after first write' if from_first_write else 'after start'}"
            f" -> {'new' if after != state else 'old'} state",
            flush=True,
        )
        state = after
    return state, committed_new


@pytest.mark.timeout(600)
def test_kill_9_during_ingest_and_reindex_never_loses_committed_state_bounded(
    tmp_path: Path, shared_embedder: Embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The default suite's loop (CI): ``CI_KILLS`` kill points per command."""
    kill_ingest_and_reindex(tmp_path, shared_embedder, monkeypatch, CI_KILLS)


@pytest.mark.kill9
@pytest.mark.timeout(1800)  # ~1 min on a quiet 2-core machine; kill points scale with load
def test_kill_9_during_ingest_and_reindex_never_loses_committed_state(
    tmp_path: Path, shared_embedder: Embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The long loop, run apart: ``pytest -m kill9`` (``TOOLWEAVE_FAULT_KILLS`` kill points per command)."""
    kill_ingest_and_reindex(tmp_path, shared_embedder, monkeypatch, KILLS)


def kill_ingest_and_reindex(
    tmp_path: Path, shared_embedder: Embedder, monkeypatch: pytest.MonkeyPatch, kills: int
) -> None:
    monkeypatch.setenv("PYTHONWARNINGS", "ignore:lancedb fork support:RuntimeWarning")
    registry = tmp_path / "reg"
    cat_a = write_catalog(tmp_path / "a.jsonl", "a")
    cat_b = write_catalog(tmp_path / "b.jsonl", "b")

    def ingest(catalog: Path) -> list[str]:
        return ["ingest-catalog", str(catalog), "--source", "fleet", "--registry", str(registry)]

    runner = Runner(registry)
    runner.run(ingest(cat_a))
    state_a = read_state(registry, shared_embedder)
    ingest_whole = runner.run(ingest(cat_b))
    state_b = read_state(registry, shared_embedder)
    assert state_a != state_b and len(state_b[0]) == N_TOOLS - 10 and len(state_a[1]) == N_TOOLS - 1
    runner.run(ingest(cat_a))
    assert read_state(registry, shared_embedder) == state_a  # the states do not depend on history
    ingest_writing = runner.write_phase(ingest(cat_b))
    assert read_state(registry, shared_embedder) == state_b

    rng = random.Random(int(os.environ.get("TOOLWEAVE_FAULT_SEED", "13")))
    state, _landed = kill_loop(
        runner,
        lambda s: ingest(cat_a if s == state_b else cat_b),
        lambda s: {state_a, state_b},
        shared_embedder,
        ingest_whole,
        ingest_writing,
        rng,
        kills,
    )
    assert runner.killed >= kills // 2, (
        f"only {runner.killed} of {kills} ingests were killed before their end"
    )
    # whatever the kills left, the next ingest completes it
    runner.run(ingest(cat_a))
    assert read_state(registry, shared_embedder) == state_a

    reindex = ["reindex", "--registry", str(registry)]
    reindex_writing = runner.write_phase(reindex)
    reindex_whole = runner.run(reindex)
    assert read_state(registry, shared_embedder) == state_a
    state, _ = kill_loop(
        runner, lambda s: reindex, lambda s: {s}, shared_embedder, reindex_whole, reindex_writing, rng, kills
    )
    assert state == state_a
