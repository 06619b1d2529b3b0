"""The offline model loader: the shipped file must be the pinned one, else a clear EmbeddingError."""

from __future__ import annotations

import hashlib
import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from toolweave.errors import EmbeddingError
from toolweave.registry import Embedder
from toolweave.registry.models import (
    MINILM,
    OFFLINE_MODELS,
    QUERY_ADAPTERS,
    TOOL_ADAPTER,
    QueryAdapterSpec,
    load_query_adapter,
    register_offline_model,
    verify_model_file,
)


def test_default_model_file_matches_its_pinned_sha256() -> None:
    verify_model_file(MINILM.model_file(), MINILM.sha256)  # raises on a different file


def test_a_file_with_another_digest_is_refused(tmp_path: Path) -> None:
    fake = tmp_path / "model.onnx"
    fake.write_bytes(b"not the model")
    with pytest.raises(EmbeddingError, match=r"has sha256 .* expected 8199be6f"):
        verify_model_file(fake, MINILM.sha256)
    # a file replaced in place (same path) is hashed again, not served from the digest cache
    fake.write_bytes(b"still not the model, longer")
    with pytest.raises(EmbeddingError, match="expected"):
        verify_model_file(fake, MINILM.sha256)


def test_a_missing_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(EmbeddingError, match="is missing"):
        verify_model_file(tmp_path / "gone.onnx", MINILM.sha256)


def test_a_missing_package_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = replace(
        MINILM, name="local/absent", package="toolweave-absent-model", module="toolweave_absent_model"
    )
    monkeypatch.setitem(OFFLINE_MODELS, spec.name, spec)
    with pytest.raises(EmbeddingError, match=re.escape("pip install toolweave-absent-model==1.0.0")):
        register_offline_model(spec)
    with pytest.raises(EmbeddingError, match="toolweave-absent-model"):
        Embedder(spec.name).embed_query("hello")


def test_a_tampered_shipped_file_is_never_loaded(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = replace(MINILM, name="local/tampered", sha256="0" * 64)
    monkeypatch.setitem(OFFLINE_MODELS, spec.name, spec)
    with pytest.raises(EmbeddingError, match="expected 0000"):
        Embedder(spec.name).embed_query("hello")


def _adapter(tmp_path: Path, matrix: np.ndarray, name: str = "local/test-adapter") -> QueryAdapterSpec:
    path = tmp_path / "w.npy"
    np.save(path, matrix.astype(np.float32))
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    return QueryAdapterSpec(name=name, base=MINILM.name, file=path, sha256=digest)


def test_a_query_adapter_maps_requests_and_leaves_tool_vectors_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = np.random.default_rng(0)
    w = rng.normal(0, 0.1, (384, 384))
    spec = _adapter(tmp_path, w)
    monkeypatch.setitem(QUERY_ADAPTERS, spec.name, spec)
    plain, adapted = Embedder(MINILM.name), Embedder(spec.name)
    assert adapted.model_id == spec.name and adapted.vector_model == MINILM.name
    text = "open a ticket for the broken build"
    np.testing.assert_array_equal(adapted.embed_documents([text]), plain.embed_documents([text]))
    q = plain.embed_query(text)
    expected = q + q @ w.astype(np.float32).T
    np.testing.assert_allclose(adapted.embed_query(text), expected / np.linalg.norm(expected), atol=1e-6)
    assert abs(float(np.linalg.norm(adapted.embed_query(text))) - 1.0) < 1e-5


def test_a_changed_or_misshapen_adapter_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = replace(_adapter(tmp_path, np.zeros((384, 384))), sha256="1" * 64)
    monkeypatch.setitem(QUERY_ADAPTERS, spec.name, spec)
    with pytest.raises(EmbeddingError, match="expected 1111"):
        Embedder(spec.name).embed_query("hello")
    small = _adapter(tmp_path, np.zeros((3, 3)), name="local/small")
    monkeypatch.setitem(QUERY_ADAPTERS, small.name, small)
    with pytest.raises(EmbeddingError, match=r"\(3, 3\), expected \(384, 384\)"):
        Embedder(small.name).embed_query("hello")


def test_the_shipped_tool_adapter_matches_its_pinned_sha256() -> None:
    matrix = load_query_adapter(TOOL_ADAPTER, MINILM.dim)  # raises on a missing or different file
    assert matrix.dtype == np.float32 and np.abs(matrix).max() > 0  # trained, not the identity
    assert (TOOL_ADAPTER.file.parent / "MODEL_CARD.md").is_file()
