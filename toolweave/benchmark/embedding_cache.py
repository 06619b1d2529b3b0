"""Embeddings cached on disk across benchmark runs, keyed by sha256(model id + text).

A benchmark re-ingests its whole catalogue into a fresh registry on every call (4-9 minutes at 4k
tools on a busy machine) and re-embeds the same queries for every method. The model is a pure
function of (model, text), so its vectors are cached in one SQLite file: comparing five methods, or
re-running tomorrow, costs one embedding pass. For benchmarks only: the gateway keeps its vectors in
the registry itself.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from toolweave.errors import EmbeddingError
from toolweave.registry.embeddings import Embedder

__all__ = ["CachedEmbedder", "default_cache_path"]


def default_cache_path() -> Path:
    """``$XDG_CACHE_HOME/toolweave/embeddings.sqlite`` (``~/.cache`` when the variable is unset)."""
    root = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(root).expanduser() / "toolweave" / "embeddings.sqlite"


class CachedEmbedder(Embedder):
    """``inner`` with a disk cache in front: only texts never seen with this model reach the model.

    It is an ``Embedder`` (the registry takes one) that delegates every model run to ``inner``.
    Vectors come back exactly as ``inner`` made them (float32, unit length), so cached and fresh runs
    give the same rankings.
    """

    def __init__(self, inner: Embedder, path: Path | None = None) -> None:
        super().__init__(inner.model_name)
        self.inner = inner
        self.path = path or default_cache_path()
        self.hits = 0
        self.misses = 0
        self._db_lock = threading.Lock()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # the registry embeds queries on its search threads: one connection, guarded by a lock
            self._db = sqlite3.connect(self.path, timeout=30, check_same_thread=False)
            self._db.execute("CREATE TABLE IF NOT EXISTS vectors (key TEXT PRIMARY KEY, vector BLOB)")
            self._db.commit()
        except sqlite3.Error as exc:
            raise EmbeddingError(f"cannot open the embedding cache {self.path}: {exc}") from exc

    @property
    def model_id(self) -> str:
        return self.inner.model_id

    @staticmethod
    def _key(text: str, model: str) -> str:
        # keyed by the model that makes the vectors: a query adapter's tool vectors are its base's
        return hashlib.sha256(f"{model}\x00{text}".encode()).hexdigest()

    def request_vectors(self, texts: Sequence[str]) -> np.ndarray:
        """Requests through the inner embedder's query model, cached under that model's name."""
        model = self.inner.query_model
        if model == self.inner.vector_model:
            return self.embed_documents(texts)
        return self._cached(texts, model, self.inner.request_vectors)

    def embed_documents(self, texts: Sequence[str], batch_size: int = 16) -> np.ndarray:
        if not texts:
            return self.inner.embed_documents(texts, batch_size)
        matrix = self._cached(
            texts, self.inner.vector_model, lambda missing: self.inner.embed_documents(missing, batch_size)
        )
        self._dim = int(matrix.shape[1])
        return matrix

    def _cached(
        self, texts: Sequence[str], model: str, embed: Callable[[list[str]], np.ndarray]
    ) -> np.ndarray:
        """``texts`` embedded by ``model``: cached rows, and ``embed`` run once over the texts not cached."""
        keys = [self._key(t, model) for t in texts]
        found = self._lookup(list(dict.fromkeys(keys)))
        missing = list(dict.fromkeys(t for t, k in zip(texts, keys, strict=True) if k not in found))
        self.hits += len(texts) - len(missing)
        self.misses += len(missing)
        if missing:
            fresh = embed(missing)
            new = {self._key(t, model): row for t, row in zip(missing, fresh, strict=True)}
            self._store(new)
            found.update(new)
        return np.stack([found[k] for k in keys]).astype(np.float32, copy=False)

    def _lookup(self, keys: list[str]) -> dict[str, np.ndarray]:
        out: dict[str, np.ndarray] = {}
        with self._db_lock:
            for start in range(0, len(keys), 500):  # SQLite bounds the number of bound parameters
                chunk = keys[start : start + 500]
                marks = ",".join("?" * len(chunk))
                rows = self._db.execute(f"SELECT key, vector FROM vectors WHERE key IN ({marks})", chunk)
                out.update((key, np.frombuffer(blob, dtype=np.float32)) for key, blob in rows)
        return out

    def _store(self, vectors: dict[str, np.ndarray]) -> None:
        rows = [(key, np.ascontiguousarray(v, dtype=np.float32).tobytes()) for key, v in vectors.items()]
        with self._db_lock:
            self._db.executemany("INSERT OR REPLACE INTO vectors VALUES (?, ?)", rows)
            self._db.commit()

    def close(self) -> None:
        with self._db_lock:
            self._db.close()
