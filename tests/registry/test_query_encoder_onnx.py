"""The query encoder a starting gateway loads without fastembed (``registry/query_encoder.py``) gives
the registry's own embedder's request vectors, bit for bit, for every shipped model (an adapter's too)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from toolweave.errors import EmbeddingError
from toolweave.registry.embeddings import Embedder
from toolweave.registry.models import MINILM, TOOL_ADAPTER, TOOLRET_V2
from toolweave.registry.query_encoder import QueryEncoder

REQUESTS = [
    "what time is it in Tokyo",
    "which hour is it in Japan right now",
    "a",
    "list all the visible and hidden contents of the current directory, then move every log file "
    "older than a week into the archive folder and tell me how much space that freed",
    "¿qué hora es en Madrid?",
]


@pytest.mark.parametrize("model", [TOOLRET_V2.name, MINILM.name, TOOL_ADAPTER.name])
def test_the_same_vectors_as_the_embedder(model: str) -> None:
    ours = np.stack(QueryEncoder(model).embed_queries(REQUESTS))
    theirs = np.stack(Embedder(model).embed_queries(REQUESTS))
    assert ours.dtype == np.float32
    assert np.array_equal(ours, theirs)


def test_a_model_that_is_not_shipped_has_none() -> None:
    with pytest.raises(EmbeddingError, match="no shipped query model"):
        QueryEncoder("BAAI/bge-small-en-v1.5")


def test_it_loads_without_fastembed() -> None:
    code = (
        "import sys; from toolweave.registry.query_encoder import QueryEncoder; "
        "QueryEncoder('toolweave/toolret-v2').embed_queries(['warm up']); "
        "print('fastembed' in sys.modules, 'lancedb' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


@pytest.mark.parametrize("model", [TOOLRET_V2.name, TOOL_ADAPTER.name])
def test_an_embedder_given_the_encoder_embeds_requests_with_it_and_loads_no_model(model: str) -> None:
    # a warm gateway takes the ready table's encoder (``Gateway.warm_up``): the same vectors, and
    # fastembed's model is loaded only for tool documents (none here)
    given = Embedder(model)
    assert given.use_request_encoder(QueryEncoder(model))
    vectors = np.stack(given.embed_queries(REQUESTS))
    assert np.array_equal(vectors, np.stack(Embedder(model).embed_queries(REQUESTS)))
    assert given.dim == vectors.shape[1]  # a shipped model's dimension is known without a run
    assert given._model is None and given._query_model is None


def test_an_embedder_refuses_another_models_encoder() -> None:
    embedder = Embedder(MINILM.name)
    assert not embedder.use_request_encoder(QueryEncoder(TOOLRET_V2.name))
    assert np.array_equal(
        np.stack(embedder.embed_queries(REQUESTS[:2])),
        np.stack(QueryEncoder(MINILM.name).embed_queries(REQUESTS[:2])),
    )


@pytest.mark.parametrize("model", [MINILM.name, TOOLRET_V2.name, TOOL_ADAPTER.name])
def test_a_shipped_models_dimension_is_its_vectors(model: str) -> None:
    assert Embedder(model).dim == Embedder(model).embed_documents(["a tool"]).shape[1]
