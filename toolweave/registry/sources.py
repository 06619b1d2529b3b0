"""The sources a registry's tools come from, with the connection spec each was configured with.

A gateway replica can only call a tool when it can reach the tool's source. A replica whose manifest
lacks a source another replica ingested finds the spec here, in a committed table of the registry, and
connects with its own environment. Specs are stored exactly as written in the manifest: ``${VAR}``
references stay unexpanded (each replica expands them from its own environment at connect time), so
no secret value is ever written to the registry. See docs/registry.md ("Replicas").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa

if TYPE_CHECKING:  # the database imports this module's schema
    from toolweave.registry.commits import Commits
    from toolweave.registry.state import RegistryState

__all__ = ["CATALOG_KIND", "SOURCE_SCHEMA", "SOURCE_TABLE", "SourceBook", "SourceSpec"]

SOURCE_TABLE = "sources"
CATALOG_KIND = "catalog"
"""The kind of a shared static catalog: nothing to connect to, its tools are served (found) by every
gateway on the registry. Backends are shared under their kind's name (``adapters/kinds.py``)."""
SOURCE_SCHEMA = pa.schema(
    [
        pa.field("name", pa.string(), nullable=False),
        pa.field("kind", pa.string(), nullable=False),  # "mcp" | "openapi" | "catalog"
        pa.field("spec", pa.string(), nullable=False),  # the manifest entry as JSON, ${VARS} unexpanded
    ]
)


@dataclass(frozen=True)
class SourceSpec:
    """One source's connection spec as its manifest wrote it."""

    name: str
    kind: str
    spec: str


class SourceBook:
    """The committed source specs (loaded by the follower into ``RegistryState.sources``)."""

    def __init__(self, state: RegistryState, commits: Commits) -> None:
        self._state = state
        self._commits = commits

    def specs(self) -> tuple[SourceSpec, ...]:
        """The committed connection specs of sources (as some replica's manifest wrote them)."""
        return self._state.sources

    def record(self, specs: Sequence[SourceSpec]) -> None:
        """Record ``specs`` (replacing those of the same names; others stay): replicas whose manifests
        lack a source learn from them how to reach it. Writes only when something changed."""
        state = self._state
        with state.write_lock:
            if not self._changes(specs):
                return
            with self._commits.writer():
                if not self._changes(specs):
                    return
                merged = {s.name: s for s in state.sources} | {s.name: s for s in specs}
                state.db.side.save_sources([vars(s) for s in sorted(merged.values(), key=lambda s: s.name)])
                state.changes.touch("sources", merged)
                self._commits.commit("sources")
                state.sources = tuple(SourceSpec(**row) for row in state.db.side.load_sources())

    def _changes(self, specs: Sequence[SourceSpec]) -> bool:
        have = {s.name: s for s in self._state.sources}
        return any(have.get(s.name) != s for s in specs)
