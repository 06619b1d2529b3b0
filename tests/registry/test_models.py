"""The offline model loader: the shipped file must be the pinned one, else a clear EmbeddingError."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest

from toolweave.errors import EmbeddingError
from toolweave.registry import Embedder
from toolweave.registry.models import MINILM, OFFLINE_MODELS, register_offline_model, verify_model_file


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
