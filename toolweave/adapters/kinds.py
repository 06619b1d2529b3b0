"""The kinds of backend, in one table: how a manifest writes each, how it is built, how it is shared.

``BACKEND_KINDS`` is read by the manifest (one section of entries per kind, ``toolweave/manifest.py``),
the factory (``adapters/factory.py``) and replicas (``server/sessions/replica.py``, which share each source
under its kind's ``name`` and rebuild it from there). Adding a kind of backend is one entry here plus
its adapter folder (a config model and a class satisfying ``Backend``).

Only config models are imported here: a backend class (and the MCP SDK or httpx it needs) is imported
when the first backend of its kind is built, after the gateway answered the handshake.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from pydantic import BaseModel, TypeAdapter

from toolweave.adapters.mcp.config import HttpServer, ServerConfig, SseServer, StdioServer
from toolweave.adapters.openapi.config import OpenAPISourceConfig
from toolweave.config_values import interpolate_tree, local_path, references
from toolweave.redaction import conceal
from toolweave.settings import Settings

if TYPE_CHECKING:
    from toolweave.adapters.backend import Backend, StatusCallback

__all__ = ["BACKEND_KINDS", "BackendKind", "BuildOptions", "Configured", "kind_named", "raw_entries"]

C = TypeVar("C")


@dataclass(frozen=True)
class BuildOptions:
    """What every backend is built with besides its own entry."""

    settings: Settings
    """Timeouts and result limits (an entry's own values win)."""
    on_status: StatusCallback | None = None
    environ: Mapping[str, str] | None = None
    """Where ``${VARS}`` are read when connecting (default: the process environment)."""
    references: Mapping[str, str] = field(default_factory=dict)
    """The values this entry's ``${VARS}`` expanded to, each to its reference: the backend reports its
    records with the references (``redaction.unexpand``), never the values (set by ``Configured.build``)."""


@dataclass(frozen=True)
class BackendKind(Generic[C]):
    """One kind of backend (module docstring)."""

    name: str
    """The kind as the registry's shared ``sources`` table records it."""
    section: str
    """The manifest section holding this kind's entries, by source name."""
    description: str
    """What the manifest section holds (the manifest field's description)."""
    config: Any
    """The type of one entry: a config model, or an annotated union of them."""
    build: Callable[[str, C, BuildOptions], Backend]
    describe: Callable[[str, C], str]
    """One line for logs, with raw values only (``${SECRET}`` stays a reference)."""
    literal_values: Callable[[C], Mapping[str, str]] = lambda _config: {}
    """Header or environment values an entry holds (a literal one may be a secret: never shared)."""
    enabled: Callable[[C], bool] = lambda _config: True
    raw: bool = False
    """Entries keep their raw text (``${VAR}`` unexpanded: they may hold secrets); the adapter
    interpolates when it connects. Otherwise a manifest's entries are interpolated when it is loaded."""
    prepare: Callable[[str, dict[str, Any], Path | None], dict[str, Any]] | None = None
    """Completes a raw manifest entry before validation (``key``, entry, the manifest's folder);
    raises ``ValueError`` saying what is missing when it cannot."""
    tags: frozenset[str] = field(default_factory=frozenset)
    """Tags of a discriminated union ``config``: pydantic names them in error locations, the YAML does not."""

    @cached_property
    def adapter(self) -> TypeAdapter[C]:
        return TypeAdapter(self.config)

    def parse(self, data: Any, *, context: Mapping[str, Any] | None = None) -> C:
        """One entry from plain data (a manifest's, after ``prepare``)."""
        return self.adapter.validate_python(data, context=dict(context or {}))

    def parse_json(self, text: str) -> C:
        """One entry as another replica shared it (its config model's JSON)."""
        return self.adapter.validate_json(text)

    def parse_shared(self, text: str, environ: Mapping[str, str]) -> C:
        """One entry as another replica shared it: a raw kind's config as written (the adapter expands
        ``${VARS}`` when it connects); another kind's raw manifest entry, expanded here from ``environ``
        like a manifest at load (a missing variable raises ``ConfigError``)."""
        if self.raw:
            return self.parse_json(text)
        return self.parse(interpolate_tree(json.loads(text), environ, self.section))


@dataclass(frozen=True)
class Configured:
    """One configured backend: its source name, kind and entry (``raw``: as written, for a kind
    expanded at load)."""

    name: str
    kind: BackendKind[Any]
    config: Any
    raw: Mapping[str, Any] | None = None

    def build(self, options: BuildOptions) -> Backend:
        environ = os.environ if options.environ is None else options.environ
        written = self.config.model_dump() if self.kind.raw or self.raw is None else self.raw
        found = references(written, environ) if isinstance(written, dict) else {}
        conceal(found)  # and none of them in a log line
        return self.kind.build(self.name, self.config, replace(options, references=found))

    def shared_spec(self) -> str:
        """The entry as replicas share it (the registry's ``sources`` table): its raw text, never a value
        expanded from this process's environment (``BackendKind.parse_shared`` reads it back)."""
        if self.kind.raw or self.raw is None:
            return str(self.config.model_dump_json())
        return json.dumps(self.raw, sort_keys=True, default=str)

    def as_written(self) -> Any:
        """The entry with its raw strings, for logs (the validated one when that cannot be built)."""
        model = self.kind.config
        if (
            self.kind.raw
            or self.raw is None
            or not (isinstance(model, type) and issubclass(model, BaseModel))
        ):
            return self.config
        return model.model_construct(**self.raw)


def raw_entries(data: Mapping[str, Any], base: Path) -> dict[tuple[str, str], dict[str, Any]]:
    """A manifest's backend entries of kinds expanded at load, as written (prepared, not expanded)."""
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for kind in BACKEND_KINDS:
        block = data.get(kind.section)
        if kind.raw or not isinstance(block, dict):
            continue
        for key, entry in block.items():
            if not isinstance(entry, dict):
                continue
            try:
                out[(kind.section, str(key))] = kind.prepare(str(key), entry, base) if kind.prepare else entry
            except ValueError:  # reported by the manifest's validation already
                continue
    return out


# -- MCP servers (adapters/mcp/) -----------------------------------------------------------------------
MCPConfig = StdioServer | HttpServer | SseServer


def _build_mcp(name: str, config: MCPConfig, options: BuildOptions) -> Backend:
    from toolweave.adapters.mcp.backend import MCPBackend

    settings = options.settings
    return MCPBackend(
        name,
        config,
        connect_timeout_s=settings.connect_timeout_s,
        call_timeout_s=settings.call_timeout_s,
        max_result_bytes=settings.max_result_bytes,
        ping_interval_s=settings.ping_interval_s,
        ping_timeout_s=settings.ping_timeout_s,
        on_status=options.on_status,
        environ=options.environ,
    )


def _mcp_values(config: MCPConfig) -> Mapping[str, str]:
    return config.env if isinstance(config, StdioServer) else config.headers


def _mcp_transport(key: str, entry: dict[str, Any], base: Path | None) -> dict[str, Any]:
    """``transport`` may be omitted: ``command`` means stdio, ``url`` means streamable HTTP."""
    if "transport" in entry:
        return entry
    if "command" in entry:
        return {**entry, "transport": "stdio"}
    if "url" in entry:
        return {**entry, "transport": "http"}
    raise ValueError("needs transport (stdio | http | sse)")


MCP = BackendKind[MCPConfig](
    name="mcp",
    section="servers",
    description="Upstream MCP servers by source name (stdio, streamable HTTP, SSE).",
    config=ServerConfig,
    build=_build_mcp,
    describe=lambda name, c: f"server {name}: {c.describe()}{'' if c.enabled else ' (disabled)'}",
    literal_values=_mcp_values,
    enabled=lambda c: c.enabled,
    raw=True,
    prepare=_mcp_transport,
    tags=frozenset({"stdio", "http", "sse", "streamable-http", "streamable_http", "streamableHttp"}),
)


# -- OpenAPI sources (adapters/openapi/) ---------------------------------------------------------------
def _build_openapi(name: str, config: OpenAPISourceConfig, options: BuildOptions) -> Backend:
    # httpx and the spec parser only for manifests that use them (not before the handshake)
    from toolweave.adapters.openapi.backend import OpenAPIBackend

    return OpenAPIBackend(
        config,
        environ=options.environ,
        references=options.references,
        on_status=options.on_status,
        max_read_bytes=options.settings.max_result_bytes,
        call_timeout_s=options.settings.call_timeout_s,
    )


def _openapi_entry(key: str, entry: dict[str, Any], base: Path | None) -> dict[str, Any]:
    """The key is the source name; spec and Arazzo paths resolve against the manifest's folder."""
    if "name" in entry and entry["name"] != key:
        raise ValueError(f"name is {entry['name']!r}; leave it out, the key names the source")
    entry = {**entry, "name": key}
    if base is not None:
        if isinstance(entry.get("spec"), str):
            entry["spec"] = local_path(entry["spec"], base)
        if isinstance(entry.get("arazzo"), list):
            entry["arazzo"] = [local_path(a, base) if isinstance(a, str) else a for a in entry["arazzo"]]
    return entry


OPENAPI = BackendKind[OpenAPISourceConfig](
    name="openapi",
    section="openapi",
    description="OpenAPI sources by name; `name` comes from the key.",
    config=OpenAPISourceConfig,
    build=_build_openapi,
    describe=lambda name, c: f"openapi {name}: {c.spec}" + (f" base_url={c.base_url}" if c.base_url else ""),
    prepare=_openapi_entry,
)


BACKEND_KINDS: tuple[BackendKind[Any], ...] = (MCP, OPENAPI)
"""Every kind of backend, in the order manifests list them and the gateway starts them."""


def kind_named(name: str) -> BackendKind[Any] | None:
    """The kind the registry's ``sources`` table calls ``name`` (None: another version's kind)."""
    return next((kind for kind in BACKEND_KINDS if kind.name == name), None)
