"""Benchmark helpers: the embedding cache across runs, and recorded first passes replayed."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

import numpy as np
import pytest

from toolweave.benchmark.embedding_cache import CachedEmbedder, default_cache_path
from toolweave.benchmark.recorded import RECORD_DEPTH, RecordedGraph, RecordedIndex
from toolweave.errors import RetrievalError
from toolweave.names import NameVocabulary
from toolweave.records import DependencyEdge, EdgeKind, QueryVariant, SearchResults, SearchScope
from toolweave.registry.embeddings import Embedder
from toolweave.registry.models import QUERY_ADAPTERS, QueryAdapterSpec
from toolweave.retrieval import retrieve
from toolweave.retrieval.pipeline import fleet_calibration
from toolweave.retrieval.results import Hit
from toolweave.settings import RetrievalSettings


class CountingEmbedder(Embedder):
    """Deterministic fake vectors; counts the texts that reached the 'model'."""

    def __init__(self, name: str = "fake-model") -> None:
        super().__init__(name)
        self.embedded: list[str] = []

    def embed_documents(self, texts: Sequence[str], batch_size: int = 16) -> np.ndarray:
        self.embedded.extend(texts)
        rows = [[len(t), sum(map(ord, t)) % 97, 1.0] for t in texts]
        matrix = np.asarray(rows, dtype=np.float32).reshape(len(texts), 3)
        return matrix / np.linalg.norm(matrix, axis=1, keepdims=True)


def test_cache_embeds_each_text_once_across_instances(tmp_path: Path) -> None:
    path = tmp_path / "cache.sqlite"
    inner = CountingEmbedder()
    first = CachedEmbedder(inner, path).embed_documents(["list files", "read file", "list files"])
    assert inner.embedded == ["list files", "read file"]  # a repeated text is embedded once
    inner2 = CountingEmbedder()
    again = CachedEmbedder(inner2, path)  # a new process, the same file
    second = again.embed_documents(["read file", "list files", "git status"])
    assert inner2.embedded == ["git status"]
    np.testing.assert_array_equal(second[0], first[1])
    np.testing.assert_array_equal(second[1], first[0])
    assert (again.hits, again.misses) == (2, 1)
    assert again.embed_query("read file").tolist() == first[1].tolist()  # queries share the cache


def test_cache_keys_include_the_model(tmp_path: Path) -> None:
    path = tmp_path / "cache.sqlite"
    CachedEmbedder(CountingEmbedder("model-a"), path).embed_documents(["same text"])
    other = CountingEmbedder("model-b")
    cached = CachedEmbedder(other, path)
    cached.embed_documents(["same text"])
    assert other.embedded == ["same text"]
    assert cached.model_id == "model-b"


def test_default_cache_lives_under_xdg_cache_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert default_cache_path() == tmp_path / "toolweave" / "embeddings.sqlite"


def test_cached_vectors_equal_fresh_ones_with_the_real_model(shared_embedder, tmp_path: Path) -> None:
    texts = ["what time is it in Tokyo", "create a git branch"]
    fresh = shared_embedder.embed_documents(texts)
    cached = CachedEmbedder(shared_embedder, tmp_path / "c.sqlite")
    cached.embed_documents(texts)
    replay = CachedEmbedder(shared_embedder, tmp_path / "c.sqlite")
    np.testing.assert_allclose(replay.embed_documents(texts), fresh, atol=1e-6)
    assert replay.misses == 0
    assert replay.dim == fresh.shape[1]


T = TypeVar("T")


class ListIndex:
    """A live index that answers from fixed lists and counts searches (and calibrations)."""

    def __init__(self) -> None:
        self.searches = self.calibrations = 0

    def search(
        self, queries: Sequence[QueryVariant], k: int, scope: SearchScope | None = None
    ) -> SearchResults:
        self.searches += 1
        assert k == RECORD_DEPTH and scope is None  # records both sides, deep enough for any run
        return [([Hit("a", 0.9), Hit("b", 0.5)], [Hit("b", 7.0), Hit("c", 2.0)]) for _ in queries]

    def is_destructive(self, tool_id: str) -> bool:
        return False

    def name_vocabulary(self) -> NameVocabulary:
        return NameVocabulary()

    def calibration(self, key: str, compute: Callable[[Sequence[str]], T]) -> T:
        self.calibrations += 1
        return compute(["a probe"])


def test_recorded_index_searches_once_and_replays_every_method() -> None:
    live = ListIndex()
    index = RecordedIndex(live=live)
    graph = RecordedGraph(
        {"a": [DependencyEdge(tool="a", depends_on="d", kind=EdgeKind.TOOL_DIRECTLY_DEPENDS_ON)]}
    )
    out = {
        m: [
            r.tool_id
            for r in retrieve("q", index, graph, RetrievalSettings(method=m, top_k=1, fleet_calibration=True))
        ]
        for m in ("vector", "bm25", "hybrid", "grtf")
    }
    assert live.searches == 2  # the query, and the probes of the fleet calibration (hybrid, grtf)
    assert out["vector"] == ["a", "b"] and out["bm25"] == ["b", "c"]
    assert out["hybrid"] == ["a", "b", "c"] and out["grtf"] == ["a", "d", "b", "c"]
    with pytest.raises(RetrievalError, match="exclude"):
        index.search([("q",)], 10, SearchScope(exclude_sources=frozenset({"x"})))
    with pytest.raises(RetrievalError, match="without a live index"):
        RecordedIndex().search([("new",)], 10)


def test_a_recorded_index_records_the_live_calibration_for_every_view() -> None:
    live = ListIndex()
    index = RecordedIndex(live=live)
    view = index.view()
    graph = RecordedGraph({})
    params = RetrievalSettings(method="hybrid", fleet_calibration=True)
    first = [retrieve("q", index, graph, params) for _ in range(3)]
    assert first[0] == first[1] == first[2] == retrieve("q", view, graph, params)
    assert live.calibrations == 1  # asked once, then replayed by the index and its views
    assert fleet_calibration(view) == fleet_calibration(index)
    assert live.searches == 2  # the probes and "q", recorded once for every run
    with pytest.raises(RetrievalError, match="no 'fleet' calibration"):
        retrieve("q", RecordedIndex(hits=index.hits), graph, params)


def test_a_query_adapter_reuses_its_base_models_cached_vectors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "cache.sqlite"
    w = np.array([[0.0, 1.0, 0.0], [0.0, 0.0, 0.0], [0.5, 0.0, 0.0]], dtype=np.float32)
    np.save(tmp_path / "w.npy", w)
    digest = hashlib.sha256((tmp_path / "w.npy").read_bytes()).hexdigest()
    spec = QueryAdapterSpec("local/adapted", "fake-model", tmp_path / "w.npy", digest)
    monkeypatch.setitem(QUERY_ADAPTERS, spec.name, spec)
    CachedEmbedder(CountingEmbedder("fake-model"), path).embed_documents(["same text"])
    inner = CountingEmbedder(spec.name)
    cached = CachedEmbedder(inner, path)
    doc = cached.embed_documents(["same text"])[0]
    assert inner.embedded == [] and cached.model_id == spec.name  # tool vectors: the base model's, cached
    mapped = doc + w @ doc
    np.testing.assert_allclose(cached.embed_query("same text"), mapped / np.linalg.norm(mapped), atol=1e-6)
