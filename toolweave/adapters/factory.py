"""Build the gateway's backends from upstream configurations.

``build_backends`` returns one ``Backend`` per upstream MCP server and per OpenAPI source. The server
starts each one's ``run(on_tools)`` as its own task and listens to ``on_status`` to stop/start
publishing a source's tools. Adapters know their own config models only, never the manifest that
holds them: the caller passes the entries in (``Manifest.enabled_servers()``, ``Manifest.openapi``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping

from toolweave.adapters.backend import Backend
from toolweave.adapters.mcp import MCPBackend, StatusCallback
from toolweave.adapters.mcp.config import HttpServer, SseServer, StdioServer
from toolweave.adapters.openapi.backend import OpenAPIBackend
from toolweave.adapters.openapi.config import OpenAPISourceConfig
from toolweave.settings import Settings

__all__ = ["build_backends"]

log = logging.getLogger(__name__)


def build_backends(
    servers: Mapping[str, StdioServer | HttpServer | SseServer],
    openapi: Iterable[OpenAPISourceConfig],
    settings: Settings,
    *,
    on_status: StatusCallback | None = None,
    environ: Mapping[str, str] | None = None,
) -> list[Backend]:
    """One backend per ``servers`` entry (MCP; pass only the enabled ones) and per ``openapi`` entry.

    Timeouts and the result size limit come from ``settings`` (a server entry's own ``timeout_s`` /
    ``connect_timeout_s`` win). Nothing connects until the caller runs each backend's ``run``.
    Catalogs are static: ingest them with ``load_catalog`` (they need no backend).
    """
    backends: list[Backend] = []
    for name, server in servers.items():
        backends.append(
            MCPBackend(
                name,
                server,
                connect_timeout_s=settings.connect_timeout_s,
                call_timeout_s=settings.call_timeout_s,
                max_result_chars=settings.max_result_chars,
                max_result_bytes=settings.max_result_bytes,
                ping_interval_s=settings.ping_interval_s,
                ping_timeout_s=settings.ping_timeout_s,
                on_status=on_status,
                environ=environ,
            )
        )
    for config in openapi:
        backends.append(
            OpenAPIBackend(
                config, environ=environ, on_status=on_status, max_read_bytes=settings.max_result_bytes
            )
        )
    return backends
