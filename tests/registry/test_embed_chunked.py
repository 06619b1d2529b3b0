"""Chunked embedding: chunks cut from the documents sorted by length, vectors back in document order."""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

import numpy as np

from toolweave.registry import Embedder
from toolweave.registry.embeddings import embed_chunked


class LengthEmbedder:
    """A vector that is the text's length (so the order of the answer can be checked), and the chunks seen."""

    def __init__(self) -> None:
        self.chunks: list[list[str]] = []

    def embed_documents(self, texts: Sequence[str], batch_size: int = 16) -> np.ndarray:
        self.chunks.append(list(texts))
        return np.array([[float(len(t))] for t in texts], dtype=np.float32)


def test_chunks_hold_similar_lengths_and_vectors_come_back_in_order() -> None:
    documents = [("x" * n) for n in np.random.default_rng(1).permutation(600)]
    fake = LengthEmbedder()
    progress: list[tuple[int, int]] = []
    vectors = embed_chunked(
        cast(Embedder, fake), documents, 16, lambda done, total: progress.append((done, total))
    )
    assert [float(v[0]) for v in vectors] == [float(len(d)) for d in documents]
    assert [len(c) for c in fake.chunks] == [256, 256, 88]
    assert [max(map(len, c)) for c in fake.chunks] == [255, 511, 599]  # shortest first, across chunks
    assert progress == [(256, 600), (512, 600), (600, 600)]
