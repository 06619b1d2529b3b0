"""The sources a registry's tools come from, with the connection spec each was configured with.

A gateway replica can only call a tool when it can reach the tool's source. A replica whose manifest
lacks a source another replica ingested finds the spec here, in a committed table of the registry, and
connects with its own environment. Specs are stored exactly as written in the manifest: ``${VAR}``
references stay unexpanded (each replica expands them from its own environment at connect time), so
no secret value is ever written to the registry. See docs/registry.md ("Replicas").
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

__all__ = ["SOURCE_SCHEMA", "SOURCE_TABLE", "SourceSpec"]

SOURCE_TABLE = "sources"
SOURCE_SCHEMA = pa.schema(
    [
        pa.field("name", pa.string(), nullable=False),
        pa.field("kind", pa.string(), nullable=False),  # "mcp" | "openapi"
        pa.field("spec", pa.string(), nullable=False),  # the manifest entry as JSON, ${VARS} unexpanded
    ]
)


@dataclass(frozen=True)
class SourceSpec:
    """One source's connection spec as its manifest wrote it."""

    name: str
    kind: str
    spec: str
