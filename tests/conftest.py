"""Shared fixtures: the real offline embedder (loaded once), benchmark folders, small tool sets."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DATASETS = REPO / ".." / "shared" / "datasets"


@pytest.fixture
def anyio_backend() -> str:
    """Async tests run on asyncio (the MCP SDK's and uvicorn's loop)."""
    return "asyncio"


@pytest.fixture(scope="session")
def shared_embedder():  # type: ignore[no-untyped-def]
    """The real all-MiniLM-L6-v2 int8 embedder; loading it once keeps the suite fast."""
    from toolweave.registry.embeddings import Embedder

    return Embedder()


@pytest.fixture(scope="session")
def dataset_dir() -> Callable[[str], Path]:
    """``dataset_dir("toollinkos")`` → the folder, or skip with a clear message when ../shared is absent."""

    def find(name: str) -> Path:
        path = DATASETS / name
        if not path.is_dir():
            pytest.skip(f"benchmark folder {path} is absent (../shared/datasets beside the repository)")
        return path.resolve()

    return find
