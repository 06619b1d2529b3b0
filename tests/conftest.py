"""Shared fixtures: the real offline embedder (loaded once), benchmark folders, small tool sets."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from toolweave.registry.embeddings import Embedder

REPO = Path(__file__).resolve().parents[1]
DATASETS = REPO / ".." / "shared" / "datasets"


@pytest.fixture
def anyio_backend() -> str:
    """Async tests run on asyncio (the MCP SDK's and uvicorn's loop)."""
    return "asyncio"


@pytest.fixture(autouse=True)
def _private_embedding_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """`toolweave bench` caches embeddings under $XDG_CACHE_HOME: never the user's own cache in tests."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))


@pytest.fixture(scope="session")
def shared_embedder() -> Embedder:
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


@pytest.fixture
def registry_lock(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A real ``redis-server`` as the writer lock of object-store registries (``registry_lock_url``, set in
    the environment so that every ``Settings`` and every child process uses it). Yields the server."""
    from tests.redis_server import running_redis

    for server in running_redis(tmp_path / "redis-lock"):
        monkeypatch.setenv("TOOLWEAVE_REGISTRY_LOCK_URL", server.url)
        yield server
