"""Build the gateway's backends from a manifest.

``backends_from_manifest`` returns one ``Backend`` per enabled upstream MCP server and per OpenAPI
source. The server starts each one's ``run(on_tools)`` as its own task and listens to ``on_status``
to stop/start publishing a source's tools. ``manifest_tools_callback`` wraps the server's
``on_tools`` so the manifest's ``core_tools``, ``examples`` and ``dependencies`` apply to every
(re-)report of a source.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

from toolweave.adapters.backend import Backend, ToolsCallback
from toolweave.adapters.mcp import MCPBackend, StatusCallback
from toolweave.adapters.openapi.backend import OpenAPIBackend
from toolweave.manifest import Manifest, apply_tool_overrides, filter_removed_edges, manifest_edges
from toolweave.records import DependencyEdge, ToolRecord
from toolweave.settings import Settings

__all__ = ["backends_from_manifest", "manifest_tools_callback"]

log = logging.getLogger(__name__)


def backends_from_manifest(
    manifest: Manifest,
    settings: Settings,
    *,
    on_status: StatusCallback | None = None,
    environ: Mapping[str, str] | None = None,
) -> list[Backend]:
    """One backend per enabled ``servers`` entry (MCP) and per ``openapi`` entry, in manifest order.

    Timeouts and the result size limit come from ``settings`` (a server entry's own ``timeout_s`` /
    ``connect_timeout_s`` win). Nothing connects until the caller runs each backend's ``run``.
    Catalogs are static: ingest them with ``load_catalog`` (they need no backend).
    """
    backends: list[Backend] = []
    for name, server in manifest.enabled_servers().items():
        backends.append(
            MCPBackend(
                name,
                server,
                connect_timeout_s=settings.connect_timeout_s,
                call_timeout_s=settings.call_timeout_s,
                max_result_chars=settings.max_result_chars,
                on_status=on_status,
                environ=environ,
            )
        )
    for config in manifest.openapi.values():
        backends.append(OpenAPIBackend(config, environ=environ, on_status=on_status))
    return backends


def manifest_tools_callback(manifest: Manifest, on_tools: ToolsCallback) -> ToolsCallback:
    """Wrap ``on_tools`` so every report carries the manifest's overrides for that source.

    Records get ``core_tools`` (kind "core") and ``examples``; the manifest's declared edges whose
    dependent tool belongs to the reported source are added (``origin="manifest"``), and edges the
    manifest removes are dropped (pinned ones never are).
    """
    declared = manifest_edges(manifest)

    async def wrapped(source: str, tools: Sequence[ToolRecord], edges: Sequence[DependencyEdge]) -> None:
        records = apply_tool_overrides(manifest, tools)
        ids = {r.id for r in records}
        merged = {e.key: e for e in edges}
        merged.update({e.key: e for e in declared if e.tool in ids})
        await on_tools(source, records, filter_removed_edges(manifest, merged.values()))

    return wrapped
