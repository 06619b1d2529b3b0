"""The project's query encoder (toolweave/toolret-v2): requests through its own pinned ONNX file, tool
vectors exactly MiniLM's, the file refused when it is not the pinned one, and the benchmarks' disk cache
keeping the two models' vectors apart."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from toolweave.benchmark.embedding_cache import CachedEmbedder
from toolweave.errors import EmbeddingError
from toolweave.registry import Embedder
from toolweave.registry.models import (
    MINILM,
    OFFLINE_MODELS,
    QUERY_ENCODERS,
    TOOLRET_V2,
    TOOLRET_V2_QUERIES,
    verify_model_file,
)

TOOLS = [
    "get current time: The current time in a given IANA timezone. Arguments: timezone",
    "create entities: Create new entities in the knowledge graph. Arguments: entities",
    "git log: Show the commit logs of a repository. Arguments: repo path, max count",
]


def test_the_shipped_query_model_matches_its_pinned_sha256_and_has_a_card() -> None:
    verify_model_file(TOOLRET_V2_QUERIES.model_file(), TOOLRET_V2_QUERIES.sha256)
    assert TOOLRET_V2_QUERIES.model_file().stat().st_size < 30 * 2**20
    assert (TOOLRET_V2_QUERIES.model_file().parent / "MODEL_CARD_V2.md").is_file()


def test_requests_get_the_encoder_and_tools_keep_minilm_vectors() -> None:
    plain, encoder = Embedder(MINILM.name), Embedder(TOOLRET_V2.name)
    assert encoder.model_id == TOOLRET_V2.name
    assert (encoder.vector_model, encoder.query_model) == (MINILM.name, TOOLRET_V2_QUERIES.name)
    np.testing.assert_array_equal(encoder.embed_documents(TOOLS), plain.embed_documents(TOOLS))
    request = "what time is it in Tokyo right now?"
    q_plain, q_encoded = plain.embed_query(request), encoder.embed_query(request)
    assert abs(float(np.linalg.norm(q_encoded)) - 1.0) < 1e-5
    assert float(q_plain @ q_encoded) < 0.999  # a model of its own, not MiniLM under another name
    # and it still lands the request on the tool it needs
    assert int(np.argmax(encoder.embed_documents(TOOLS) @ q_encoded)) == 0


def test_a_changed_query_model_file_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    tampered = replace(TOOLRET_V2_QUERIES, name="local/tampered-queries", sha256="2" * 64)
    monkeypatch.setitem(OFFLINE_MODELS, tampered.name, tampered)
    spec = replace(TOOLRET_V2, name="local/tampered-encoder", queries=tampered.name)
    monkeypatch.setitem(QUERY_ENCODERS, spec.name, spec)
    encoder = Embedder(spec.name)
    encoder.embed_documents(TOOLS)  # tools are MiniLM's: unaffected
    with pytest.raises(EmbeddingError, match="expected 2222"):
        encoder.embed_query("hello")


def test_the_disk_cache_keeps_request_vectors_per_query_model(tmp_path: Path) -> None:
    path = tmp_path / "cache.sqlite"
    plain = CachedEmbedder(Embedder(MINILM.name), path)
    encoder = CachedEmbedder(Embedder(TOOLRET_V2.name), path)
    request = "remember the hash of the last commit"
    q_plain = plain.embed_query(request)
    q_encoded = encoder.embed_query(request)  # same text, same cache file: not MiniLM's vector
    np.testing.assert_allclose(q_encoded, Embedder(TOOLRET_V2.name).embed_query(request), atol=1e-6)
    assert float(q_plain @ q_encoded) < 0.999
    again = CachedEmbedder(Embedder(TOOLRET_V2.name), path)
    np.testing.assert_array_equal(again.embed_query(request), q_encoded)  # from the file this time
    assert (again.hits, again.misses) == (1, 0)
