"""Build the gateway's backends from a manifest.

``backends_from_manifest`` returns one ``Backend`` per enabled upstream MCP server and per OpenAPI
source. The server starts each one's ``run(on_tools)`` as its own task and listens to ``on_status``
to stop/start publishing a source's tools. The manifest's ``core_tools``, ``examples`` and
``dependencies`` are applied by the server to every (re-)report of a source.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from toolweave.adapters.backend import Backend
from toolweave.adapters.mcp import MCPBackend, StatusCallback
from toolweave.manifest import Manifest
from toolweave.settings import Settings

__all__ = ["backends_from_manifest"]

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
    if manifest.openapi:  # httpx and the spec parser only for manifests that use them
        from toolweave.adapters.openapi.backend import OpenAPIBackend

    for config in manifest.openapi.values():
        backends.append(OpenAPIBackend(config, environ=environ, on_status=on_status))
    return backends
