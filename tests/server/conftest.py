"""Fixtures for the gateway's in-process tests: a real registry and embedder, in-test backends."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def embedder():
    """The real offline embedder, loaded once (~1 s) for every test that builds a registry."""
    from toolweave.registry.embeddings import Embedder
    from toolweave.settings import Settings

    return Embedder(Settings().embedding_model)


@pytest.fixture
def registry(tmp_path: Path, embedder) -> Iterator[object]:
    from toolweave.registry import Registry
    from toolweave.settings import Settings

    reg = Registry.open(
        tmp_path / "registry", embedder=embedder, settings=Settings(home=tmp_path / "registry")
    )
    yield reg
    reg.close()


@pytest.fixture(autouse=True)
def no_early_front_outlives_its_test(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Stop every early front a test started and left running. Its thread selects on descriptors the
    test closes; left alive, it woke on the next test's pipes under the same numbers and read their
    lines (a test then waited 300 s for an answer the stray front had taken)."""
    from toolweave.server.fronts.early import EarlyFront

    started: list[EarlyFront] = []
    start = EarlyFront.start

    def tracked(front: EarlyFront) -> None:
        started.append(front)
        start(front)

    monkeypatch.setattr(EarlyFront, "start", tracked)
    yield
    for front in started:
        if front._thread.is_alive():
            with front._lock:  # what it still holds would go to a descriptor the test closed
                front._held.lines.clear()
                front._held.turns.clear()
            front.hand_over()  # wakes its thread through its own pipe and waits for it
