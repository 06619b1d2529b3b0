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
