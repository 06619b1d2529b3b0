"""Requests' vectors without fastembed: the query model's ONNX run through onnxruntime and tokenizers.

A starting gateway ranks its first answers with the vectors of its ready table
(``server/turns/ready_rank.py``) as soon as it can embed a request. Importing fastembed costs 3.4 s of
CPU on its own (it pulls in huggingface_hub and every model family); onnxruntime and tokenizers, which
it runs underneath, cost 0.5 s. So this module runs the same model the same way fastembed does for a
shipped model (``models.OFFLINE_MODELS``: its tokenizer settings, mean pooling over the attention mask,
normalisation, one intra-op thread as the ``Embedder``'s query instance) and gives the same numbers as
``Embedder.embed_queries`` (``tests/registry/test_query_encoder.py`` compares them), adapter included.
A model that is not shipped (one only fastembed's cache holds) has no encoder here: ``EmbeddingError``.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from toolweave.errors import EmbeddingError
from toolweave.registry.embeddings import QUERY_THREADS
from toolweave.registry.models import (
    OFFLINE_MODELS,
    QUERY_ADAPTERS,
    ModelSpec,
    load_query_adapter,
    request_model_of,
    verify_model_file,
)

if TYPE_CHECKING:
    from onnxruntime import InferenceSession
    from tokenizers import Tokenizer

__all__ = ["QueryEncoder"]

_BATCH = 16  # the Embedder's query batches: a batch is padded to its longest text


class QueryEncoder:
    """Embeds requests as ``Embedder(model_name).embed_queries`` does (see the module docstring)."""

    def __init__(self, model_name: str) -> None:
        """Load the query model of ``model_name`` (seconds on a busy machine: call it off the event loop)."""
        self.model_name = model_name
        spec = OFFLINE_MODELS.get(request_model_of(model_name))
        if spec is None or spec.pooling != "MEAN":  # the pooling run here: fastembed's for these
            raise EmbeddingError(f"{model_name!r} has no shipped query model to run without fastembed")
        self._tokenizer = _tokenizer(spec)
        self._session = _session(spec)
        self._inputs = {node.name for node in self._session.get_inputs()}
        adapter = QUERY_ADAPTERS.get(model_name)
        self._adapter = None if adapter is None else load_query_adapter(adapter, spec.dim)
        self._lock = threading.Lock()  # one run at a time, as the Embedder's single query instance

    def embed_queries(self, texts: Sequence[str]) -> list[np.ndarray]:
        """One unit vector (float32) per text."""
        if not texts:
            return []
        matrix = self.request_vectors(texts)
        if self._adapter is not None:
            matrix = _normalise(matrix + matrix @ self._adapter.T)
        return list(matrix)

    def request_vectors(self, texts: Sequence[str]) -> np.ndarray:
        """``Embedder.request_vectors``: the query model's unit vectors, before any adapter (one row per
        text; ``texts`` not empty)."""
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        rows: list[np.ndarray] = []
        with self._lock:
            for start in range(0, len(order), _BATCH):
                rows.extend(self._run([texts[i] for i in order[start : start + _BATCH]]))
        matrix = np.empty((len(texts), len(rows[0])), dtype=np.float32)
        matrix[order] = np.asarray(rows, dtype=np.float32)
        return _normalise(matrix)  # the Embedder's own pass, after fastembed's

    def _run(self, batch: list[str]) -> np.ndarray:
        encoded = self._tokenizer.encode_batch(batch)
        ids = np.array([e.ids for e in encoded], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encoded], dtype=np.int64)
        feed: dict[str, Any] = {"input_ids": ids}
        if "attention_mask" in self._inputs:
            feed["attention_mask"] = mask
        if "token_type_ids" in self._inputs:
            feed["token_type_ids"] = np.zeros_like(ids)
        try:
            output = self._session.run(None, feed)[0]
        except Exception as exc:  # onnxruntime raises many types: mapped once
            raise EmbeddingError(f"embedding with {self.model_name!r} failed: {exc}") from exc
        # fastembed's mean pooling (float64 sums over the real tokens) and normalisation, then its cast
        summed = np.sum(output, axis=1, where=mask[:, :, np.newaxis].astype(bool), dtype=np.float64)
        pooled = summed / np.maximum(np.sum(mask, axis=1, keepdims=True), 1e-9)
        norms = np.maximum(np.linalg.norm(pooled, ord=2, axis=1, keepdims=True), 1e-12)
        result: np.ndarray = (pooled / norms).astype(output.dtype, copy=False)
        return result


def _normalise(matrix: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return np.asarray(matrix / norms, dtype=np.float32)


def _tokenizer(spec: ModelSpec) -> Tokenizer:
    """The tokenizer as fastembed sets it up (``load_tokenizer``): truncation at the config's length, the
    special tokens added, padding to the batch's longest."""
    from tokenizers import AddedToken, Tokenizer

    folder = spec.tokenizer_dir
    try:
        config = json.loads((folder / "tokenizer_config.json").read_text())
        special = json.loads((folder / "special_tokens_map.json").read_text())
        tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    except Exception as exc:  # OSError, ValueError, and tokenizers raises its own Exception
        raise EmbeddingError(f"the tokenizer of {spec.name!r} cannot be read from {folder}: {exc}") from exc
    lengths = [
        v for v in (config.get("model_max_length"), config.get("max_length")) if type(v) is int and v > 0
    ]
    truncation = tokenizer.truncation or {}
    tokenizer.enable_truncation(
        max_length=min(lengths),
        direction=config.get("truncation_side") or truncation.get("direction", "right"),
    )
    for value in special.values():
        for token in value if isinstance(value, list) else [value]:
            tokenizer.add_special_tokens([token if isinstance(token, str) else AddedToken(**token)])
    padding = tokenizer.padding or {}
    pad_token = padding.get("pad_token") or config.get("pad_token")
    pad_id = padding.get("pad_id")
    if pad_id is None:
        pad_id = tokenizer.token_to_id(pad_token)
    tokenizer.enable_padding(
        direction=config.get("padding_side") or padding.get("direction", "right"),
        pad_id=pad_id,
        pad_type_id=padding.get("pad_type_id", 0),
        pad_token=pad_token,
        pad_to_multiple_of=padding.get("pad_to_multiple_of"),
        length=None,
    )
    return tokenizer


def _session(spec: ModelSpec) -> InferenceSession:
    """The ONNX session as fastembed opens it for the Embedder's query instance (one thread)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import onnxruntime as ort

    path = spec.model_file()
    verify_model_file(path, spec.sha256, f"reinstall it: {spec.install_hint}")
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.intra_op_num_threads = options.inter_op_num_threads = QUERY_THREADS
    try:
        return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"], sess_options=options)
    except Exception as exc:  # onnxruntime raises many types: mapped once
        raise EmbeddingError(f"cannot load embedding model {spec.name!r} from {path}: {exc}") from exc
