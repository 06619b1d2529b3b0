"""The gateway manifest: which upstreams, catalogs and settings one ``toolweave serve`` uses.

A manifest is YAML validated with pydantic. Errors name the file, line and field, because a YAML
typo found at startup should be fixed in seconds: we compose the YAML node tree ourselves, keep the
start mark of every key and value, and map pydantic's error ``loc`` back to those marks.

``${VAR}`` and ``${VAR:-default}`` work in every string (``$${`` is a literal ``${``). A missing
variable is an error at load time, with its line. The ``servers`` section keeps the *raw* text
(``Bearer ${API_TOKEN}``) so secrets never reach logs, reprs or the registry; the MCP adapter calls
``interpolated()`` only when it builds a transport. Everything else is interpolated at load (OpenAPI
``auth`` names environment variables rather than holding secrets).

Relative paths (``registry``, catalog paths, OpenAPI ``spec``/``arazzo`` files, a stdio server's
``cwd`` and a ``./``-relative ``command``) resolve against the manifest's folder, so a manifest works
from any working directory.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import GenericAlias
from typing import Any

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    ValidationInfo,
    create_model,
    field_validator,
)
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from toolweave.adapters.kinds import BACKEND_KINDS, BackendKind, Configured, raw_entries
from toolweave.adapters.mcp.config import HttpServer, ServerConfig, SseServer, StdioServer
from toolweave.config_values import interpolate, interpolate_tree, is_uri, missing_vars, resolve_path
from toolweave.errors import ConfigError
from toolweave.policy import IdentityPolicy, Policy
from toolweave.records import DependencyEdge, EdgeKind, ToolRecord, sanitize_name
from toolweave.registry.overrides import EdgeSelector, GraphOverrides
from toolweave.settings import OldSecurityKeys, PublishSettings, RetrievalSettings, SecuritySettings, Settings
from toolweave.yaml_limits import expansion_problem, size_problem

__all__ = [
    "CatalogEntry",
    "Dependencies",
    "EdgeRemoval",
    "EdgeSpec",
    "HttpServer",
    "Manifest",
    "ServerConfig",
    "SseServer",
    "StdioServer",
    "apply_tool_overrides",
    "filter_removed_edges",
    "graph_overrides",
    "interpolate",
    "load_manifest",
    "manifest_edges",
    "validate_source_name",
]

log = logging.getLogger(__name__)

MAX_SOURCE_LENGTH = 40
"""Source names prefix every tool id (≤ 64 chars); a long prefix would leave no room for the name."""


# -- models -------------------------------------------------------------------------------------------------
class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class CatalogEntry(_Strict):
    """A static catalog (``toolweave.registry.catalog.load_catalog``) ingested under ``source``."""

    path: Path
    source: str
    require_description: bool = True

    @field_validator("path")
    @classmethod
    def _path(cls, v: Path, info: ValidationInfo) -> Path:
        return resolve_path(v, info)


def _parse_kind(v: Any) -> Any:
    return EdgeKind.parse(v) if isinstance(v, str) else v


class EdgeSpec(_Strict):
    """A declared edge: ``tool`` depends on ``depends_on`` (tool ids)."""

    tool: str = Field(min_length=1)
    depends_on: str = Field(min_length=1)
    kind: EdgeKind | None = Field(
        None, description="Default: PARAMETER_DIRECTLY_DEPENDS_ON with a parameter, else TOOL_DIRECTLY_..."
    )
    parameter: str | None = None
    reason: str = ""

    @field_validator("kind", mode="before")
    @classmethod
    def _kind(cls, v: Any) -> Any:
        return _parse_kind(v)

    @property
    def resolved_kind(self) -> EdgeKind:
        if self.kind is not None:
            return self.kind
        return EdgeKind.PARAMETER_DIRECTLY_DEPENDS_ON if self.parameter else EdgeKind.TOOL_DIRECTLY_DEPENDS_ON


class EdgeRemoval(_Strict):
    """Drop declared/inferred edges between two tools (of one kind / parameter when given)."""

    tool: str = Field(min_length=1)
    depends_on: str = Field(min_length=1)
    kind: EdgeKind | None = None
    parameter: str | None = None

    @field_validator("kind", mode="before")
    @classmethod
    def _kind(cls, v: Any) -> Any:
        return _parse_kind(v)


class Dependencies(_Strict):
    add: list[EdgeSpec] = Field(default_factory=list)
    remove: list[EdgeRemoval] = Field(default_factory=list)
    pin: list[EdgeSpec] = Field(
        default_factory=list, description="Kept even if a removal or inference disagrees."
    )


class _StrictRetrieval(RetrievalSettings):
    # Typo protection: the shared settings model ignores unknown keys, a manifest must not.
    model_config = ConfigDict(extra="forbid")


class _StrictPublish(PublishSettings):
    model_config = ConfigDict(extra="forbid")


class _StrictSecurity(SecuritySettings, OldSecurityKeys):
    model_config = ConfigDict(extra="forbid")


class Manifest(_Strict):
    """A validated manifest. Build it with ``load_manifest``; paths are already absolute.

    Besides the fields below, a loaded manifest has one section per kind of backend, named and typed
    by the kinds' table (``adapters/kinds.py``: ``servers``, ``openapi``); read them with ``backends``.
    """

    source_path: Path | None = Field(None, description="The YAML file this came from (set by the loader).")
    registry: Path | str | None = Field(
        None,
        description="Registry: a directory (relative to the manifest's folder) or an object-store URI "
        "such as `s3://bucket/prefix`; the CLI's --registry wins.",
    )
    catalogs: list[CatalogEntry] = Field(default_factory=list)
    retrieval: _StrictRetrieval = Field(default_factory=_StrictRetrieval)
    publish: _StrictPublish = Field(default_factory=_StrictPublish)
    dependencies: Dependencies = Field(default_factory=Dependencies)
    core_tools: list[str] = Field(default_factory=list)
    examples: dict[str, list[str]] = Field(default_factory=dict)
    private: list[str] = Field(
        default_factory=list,
        description="Tool ids or source names whose calls are never kept as usage examples (Tool2Vec).",
    )
    security: _StrictSecurity = Field(default_factory=_StrictSecurity)
    policy: dict[str, IdentityPolicy] = Field(
        default_factory=dict, description="Rules per identity name (`*` = everyone else); see policy.py."
    )

    @property
    def access_policy(self) -> Policy:
        return Policy(identities=self.policy)

    @field_validator("registry")
    @classmethod
    def _registry(cls, v: Path | str | None, info: ValidationInfo) -> Path | str | None:
        # An object-store URI stays a string: as a Path, `s3://tools/prod` would become the local
        # folder `<manifest dir>/s3:/tools/prod`.
        if v is None or (isinstance(v, str) and is_uri(v)):
            return v
        return resolve_path(Path(v), info)

    _raw: dict[tuple[str, str], dict[str, Any]] = PrivateAttr(default_factory=dict)
    """(section, source) → the entry as written (``${VARS}`` unexpanded), for kinds expanded at load."""

    def section(self, kind: BackendKind[Any]) -> dict[str, Any]:
        """The entries of ``kind`` by source name (none in a manifest not built by ``load_manifest``)."""
        # The kinds' sections are fields of the loaded model (_Loaded below), named by the table.
        entries = getattr(self, kind.section, None)
        return entries if isinstance(entries, dict) else {}

    def backends(self, *, enabled_only: bool = True) -> list[Configured]:
        """Every backend entry, of every kind, in the kinds' order (only enabled ones by default)."""
        return [
            Configured(name, kind, config, self._raw.get((kind.section, name)))
            for kind in BACKEND_KINDS
            for name, config in self.section(kind).items()
            if not enabled_only or kind.enabled(config)
        ]

    @property
    def sources(self) -> list[str]:
        """Every source name the manifest defines (backends of every kind, catalogs)."""
        return [*(b.name for b in self.backends(enabled_only=False)), *(c.source for c in self.catalogs)]

    def describe(self) -> str:
        """Human summary for logs: raw values only, so ``${SECRET}`` stays a reference."""
        where = self.source_path or "<memory>"
        lines = [f"manifest {where}"]
        lines += [f"  {b.kind.describe(b.name, b.as_written())}" for b in self.backends(enabled_only=False)]
        lines += [f"  catalog {c.source}: {c.path}" for c in self.catalogs]
        return "\n".join(lines)

    def settings_for(self, settings: Settings, *, registry: Path | str | None = None) -> Settings:
        """``settings`` with what this manifest sets explicitly applied; ``registry`` (the CLI's) wins."""
        retrieval = RetrievalSettings.model_validate(
            {
                **settings.retrieval.model_dump(),
                **self.retrieval.model_dump(include=self.retrieval.model_fields_set),
            }
        )
        publish = PublishSettings.model_validate(
            {
                **settings.publish.model_dump(),
                **self.publish.model_dump(include=self.publish.model_fields_set),
            }
        )
        security = SecuritySettings.model_validate(
            {
                **settings.security.model_dump(),
                **self.security.model_dump(include=self.security.model_fields_set),
            }
        )
        update: dict[str, Any] = {"retrieval": retrieval, "publish": publish, "security": security}
        update |= self.security.moved()  # an old manifest's names of settings that left `security`
        home = registry or self.registry
        if home is not None:  # model_copy skips validators: keep a URI a string, make a path a Path
            update["home"] = home if isinstance(home, Path) or is_uri(home) else Path(home).expanduser()
        return settings.model_copy(update=update)


_SECTIONS: dict[str, Any] = {
    kind.section: (
        GenericAlias(dict, (str, kind.config)),
        Field(default_factory=dict, description=kind.description),
    )
    for kind in BACKEND_KINDS
}
_Loaded = create_model("Manifest", __base__=Manifest, **_SECTIONS)
"""What ``load_manifest`` validates: ``Manifest`` with one section per kind of backend."""


# -- helpers over records -----------------------------------------------------------------------------------
def apply_tool_overrides(manifest: Manifest, records: Iterable[ToolRecord]) -> list[ToolRecord]:
    """Mark ``core_tools`` as kind "core" and add the manifest's usage ``examples`` (deduplicated)."""
    core = set(manifest.core_tools)
    out = []
    for rec in records:
        update: dict[str, Any] = {}
        if rec.id in core and rec.kind != "core":
            update["kind"] = "core"
        extra = manifest.examples.get(rec.id)
        if extra:
            merged = tuple(dict.fromkeys([*rec.examples, *extra]))
            if merged != rec.examples:
                update["examples"] = merged
        out.append(rec.model_copy(update=update) if update else rec)
    return out


def manifest_edges(manifest: Manifest) -> list[DependencyEdge]:
    """``dependencies.add`` and ``dependencies.pin`` as edges with ``origin="manifest"``.

    Pinned edges carry ``evidence="manifest:pin"`` so whoever merges edges can keep them over removals.
    """
    edges: dict[tuple[str, str, EdgeKind, str | None], DependencyEdge] = {}
    for evidence, specs in (
        ("manifest:add", manifest.dependencies.add),
        ("manifest:pin", manifest.dependencies.pin),
    ):
        for spec in specs:
            edge = DependencyEdge(
                tool=spec.tool,
                depends_on=spec.depends_on,
                kind=spec.resolved_kind,
                parameter_name=spec.parameter,
                reason=spec.reason,
                origin="manifest",
                evidence=evidence,
            )
            edges[edge.key] = edge  # a pin of the same edge overrides its plain "add"
    return list(edges.values())


def graph_overrides(manifest: Manifest) -> GraphOverrides:
    """The manifest's ``dependencies`` as the registry's graph corrections (add / remove / pin), each
    add / pin entry with where it was written (``gw.yaml: dependencies.add[2]``) for problem reports."""
    removals = [EdgeSelector(r.tool, r.depends_on, r.kind, r.parameter) for r in manifest.dependencies.remove]
    overrides = GraphOverrides.from_edges(manifest_edges(manifest), removals)
    file = manifest.source_path or "<memory>"
    for section, specs in (("add", manifest.dependencies.add), ("pin", manifest.dependencies.pin)):
        for n, spec in enumerate(specs):  # a pin of the same edge comes last: its entry is named
            key = (spec.tool, spec.depends_on, spec.resolved_kind, spec.parameter)
            overrides.where[key] = f"{file}: dependencies.{section}[{n}]"
    return overrides


def filter_removed_edges(manifest: Manifest, edges: Iterable[DependencyEdge]) -> list[DependencyEdge]:
    """Drop edges matching ``dependencies.remove``, except those ``dependencies.pin`` lists."""
    overrides = graph_overrides(manifest)
    return [e for e in edges if not overrides.is_removed(e)]


def validate_source_name(name: str) -> str | None:
    """Why ``name`` cannot be a source name (tool id prefix), or None when it can."""
    if not name:
        return "a source name cannot be empty"
    if sanitize_name(name) != name:
        return (
            f"source name {name!r} may only hold letters, digits, '_' and '-' (try {sanitize_name(name)!r})"
        )
    if "__" in name:
        return f"source name {name!r} cannot contain '__' (it separates source and tool in ids)"
    if len(name) > MAX_SOURCE_LENGTH:
        return f"source name {name!r} is longer than {MAX_SOURCE_LENGTH} characters"
    return None


# -- loading with line numbers -------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Where:
    line: int
    column: int


Path_ = tuple[str | int, ...]


class _Composer:
    """Turn a YAML node tree into Python data, remembering where each key and value started."""

    def __init__(self, loader: yaml.SafeLoader, file: str) -> None:
        self.loader = loader
        self.file = file
        self.marks: dict[Path_, _Where] = {}
        self.errors: list[tuple[int, int, str]] = []

    def where(self, node: Node) -> _Where:
        return _Where(node.start_mark.line + 1, node.start_mark.column + 1)

    def build(self, node: Node, path: Path_) -> Any:
        self.marks.setdefault(path, self.where(node))
        if isinstance(node, MappingNode):
            self.loader.flatten_mapping(node)  # resolves `<<: *anchor` merges
            out: dict[Any, Any] = {}
            for key_node, value_node in node.value:
                key = self.loader.construct_object(key_node, deep=True)
                if not isinstance(key, str | int | float | bool) or key is None:
                    self.add(self.where(key_node), path, "mapping keys must be scalars")
                    continue
                key = str(key)
                if key in out:
                    self.add(self.where(key_node), (*path, key), "duplicate key")
                self.marks[(*path, key)] = self.where(key_node)  # errors point at the key's line
                out[key] = self.build(value_node, (*path, key))
            return out
        if isinstance(node, SequenceNode):
            return [self.build(item, (*path, i)) for i, item in enumerate(node.value)]
        assert isinstance(node, ScalarNode)
        return self.loader.construct_object(node, deep=True)

    def add(self, where: _Where | None, path: Path_, message: str) -> None:
        # Kept with line and column so the summary lists problems in file order.
        line, col = (where.line, where.column) if where else (0, 0)
        self.errors.append((line, col, self.fmt(where, path, message)))

    def fmt(self, where: _Where | None, path: Path_, message: str) -> str:
        field = _dotted(path) or "<top>"
        at = f"{self.file}:{where.line}:{where.column}" if where else self.file
        return f"{at}: {field}: {message}"

    def locate(self, path: Path_) -> _Where | None:
        while path:
            if path in self.marks:
                return self.marks[path]
            path = path[:-1]
        return self.marks.get(())


def _dotted(path: Sequence[str | int]) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _data_path(data: Any, loc: Sequence[str | int]) -> tuple[Path_, list[str | int]]:
    """Follow pydantic's ``loc`` through the data; parts that are not data keys (union tags,
    validator names) are skipped. Returns the path that exists and the part that does not."""
    path: list[str | int] = []
    cur = data
    rest: list[str | int] = []
    for part in loc:
        if isinstance(cur, dict) and str(part) in cur:
            cur = cur[str(part)]
            path.append(str(part))
        elif isinstance(cur, list) and isinstance(part, int) and 0 <= part < len(cur):
            cur = cur[part]
            path.append(part)
        elif isinstance(part, str) and part in _NOT_DATA_KEYS:
            continue
        else:
            rest.append(part)
    return tuple(path), rest


_NOT_DATA_KEYS = frozenset({"function-after", "function-before"}).union(*(k.tags for k in BACKEND_KINDS))
"""Parts of pydantic's error locations that name validators or union tags, not keys of the YAML."""


def _prepare_backends(resolved: dict[str, Any], comp: _Composer, base: Path) -> None:
    """Complete each backend entry as its kind says (``BackendKind.prepare``); an entry that cannot be
    completed is reported and left out, so that the rest is still validated."""
    for kind in BACKEND_KINDS:
        block = resolved.get(kind.section)
        if kind.prepare is None or not isinstance(block, dict):
            continue
        entries = {}
        for key, entry in block.items():
            try:
                entries[key] = kind.prepare(str(key), entry, base) if isinstance(entry, dict) else entry
            except ValueError as exc:
                comp.add(comp.locate((kind.section, key)), (kind.section, key), str(exc))
        resolved[kind.section] = entries


def _check_sources(data: dict[str, Any], comp: _Composer) -> None:
    seen: dict[str, Path_] = {}

    def check(name: Any, path: Path_) -> None:
        name = str(name)
        problem = validate_source_name(name)
        if problem:
            comp.add(comp.locate(path), path, problem)
        elif name in seen:
            first = comp.locate(seen[name])
            comp.add(
                comp.locate(path),
                path,
                f"source name {name!r} is already used by "
                f"{_dotted(seen[name])} (line {first.line if first else '?'}); sources must be unique",
            )
        else:
            seen[name] = path

    for section in (kind.section for kind in BACKEND_KINDS):
        block = data.get(section)
        if isinstance(block, dict):
            for name in block:
                check(name, (section, name))
    catalogs = data.get("catalogs")
    if isinstance(catalogs, list):
        for i, entry in enumerate(catalogs):
            if isinstance(entry, dict) and "source" in entry:
                check(entry["source"], ("catalogs", i, "source"))


def _check_variables(value: Any, path: Path_, comp: _Composer, environ: Mapping[str, str]) -> set[str]:
    """Report every ``${VAR}`` without a value or default; returns their names."""
    missing: set[str] = set()
    if isinstance(value, str):
        for name in missing_vars(value, environ):
            missing.add(name)
            comp.add(
                comp.locate(path),
                path,
                f"environment variable {name!r} is not set (export it or write ${{{name}:-default}})",
            )
    elif isinstance(value, dict):
        for k, v in value.items():
            missing |= _check_variables(v, (*path, k), comp, environ)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            missing |= _check_variables(v, (*path, i), comp, environ)
    return missing


MAX_MANIFEST_CHARS = 4 * 1024 * 1024
"""A manifest is configuration: megabytes of it are a mistake (or an attack), not a fleet."""

# Sections that may hold secrets keep their raw text; the adapters interpolate when connecting.
# (OpenAPI auth names environment variables instead of holding secrets, so it is interpolated here.)
_RAW_SECTIONS = frozenset(kind.section for kind in BACKEND_KINDS if kind.raw)


def load_manifest(path: Path, *, environ: Mapping[str, str] | None = None) -> Manifest:
    """Read and validate a manifest. Raises ``ConfigError`` listing every problem with file:line:column."""
    env = os.environ if environ is None else environ
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read manifest: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"{path}: not a manifest: byte {exc.start} is not UTF-8 text (a binary file?)"
        ) from exc
    file = str(path)
    if too_big := size_problem(text, MAX_MANIFEST_CHARS):
        raise ConfigError(f"{file}: {too_big}")
    try:
        loader = yaml.SafeLoader(text)
        try:
            root = loader.get_single_node()
            if unsafe := expansion_problem(root):
                raise ConfigError(f"{file}: {unsafe}")
            comp = _Composer(loader, file)
            data = {} if root is None else comp.build(root, ())
        finally:
            loader.dispose()
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f"{file}:{mark.line + 1}:{mark.column + 1}" if mark else file
        raise ConfigError(f"{at}: invalid YAML: {getattr(exc, 'problem', None) or exc}") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{file}:1:1: a manifest must be a mapping (servers:, catalogs:, ...)")

    _check_sources(data, comp)
    missing = _check_variables(data, (), comp, env)
    # Keep validating after the first problems, so one run reports them all: missing variables
    # become "" and entries their kind cannot complete are left out (both already reported).
    env = {**env, **dict.fromkeys(missing, "")} if missing else env
    resolved = {k: v if k in _RAW_SECTIONS else interpolate_tree(v, env, k) for k, v in data.items()}
    base = path.resolve().parent
    _prepare_backends(resolved, comp, base)
    if "source_path" in resolved:
        del resolved["source_path"]
        comp.add(comp.locate(("source_path",)), ("source_path",), "is set by the loader, not in the file")
    try:
        manifest = _Loaded.model_validate(
            {**resolved, "source_path": path.resolve()}, context={"base_dir": base}
        )
    except ValidationError as exc:
        for err in exc.errors():
            found, rest = _data_path(data, err["loc"])
            message = _message(err, rest)
            comp.add(comp.locate(found), (*found, *rest), message)
    if comp.errors:
        raise ConfigError(_summary(file, comp.errors))
    manifest._raw = raw_entries(data, base)
    return manifest


def _message(err: Any, rest: list[str | int]) -> str:
    kind = err["type"]
    if kind == "extra_forbidden":
        return "unknown key (typo?)"
    if kind == "missing":
        return "required field is missing"
    if kind == "union_tag_invalid":  # a config that is a union of models, told apart by one field
        ctx = err.get("ctx", {})
        field = str(ctx.get("discriminator", "kind")).strip("'")
        return f"unknown {field} {ctx.get('tag')!r}; expected one of {ctx.get('expected_tags')}"
    msg = str(err["msg"])
    return msg.removeprefix("Value error, ")


def _summary(file: str, errors: list[tuple[int, int, str]]) -> str:
    unique = sorted(set(errors))
    head = f"invalid manifest {file} ({len(unique)} problem{'s' if len(unique) > 1 else ''}):"
    return "\n".join([head, *(f"  {text}" for _, _, text in unique)])
