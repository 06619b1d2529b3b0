"""Build the gateway's backends from a manifest.

``backends_from_manifest`` returns one ``Backend`` per enabled upstream MCP server and per OpenAPI
source. The server starts each one's ``run(on_tools)`` as its own task and listens to ``on_status``
to stop/start publishing a source's tools. ``manifest_tools_callback`` wraps the server's
``on_tools`` so the manifest's ``core_tools``, ``examples`` and ``dependencies`` apply to every
(re-)report of a source.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any

import anyio
import mcp_types as types

from toolweave.adapters.backend import Backend, Sampler, ToolsCallback
from toolweave.adapters.mcp import MCPBackend, StatusCallback, error_result
from toolweave.adapters.openapi.config import OpenAPISourceConfig
from toolweave.manifest import Manifest, apply_tool_overrides, filter_removed_edges, manifest_edges
from toolweave.records import DependencyEdge, ToolRecord
from toolweave.settings import Settings

__all__ = ["OpenAPIBackendAdapter", "backends_from_manifest", "manifest_tools_callback"]

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
        backends.append(OpenAPIBackendAdapter(config, on_status=on_status))
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


class OpenAPIBackendAdapter:
    """An OpenAPI source as a ``Backend``: ``run`` loads the spec once, reports its tools and edges,
    then idles (a spec does not change under us); a spec that fails to load is retried with backoff.

    Calls go through the OpenAPI adapter's ``OpenAPIBackend(config, client).call`` over one shared
    ``httpx.AsyncClient`` that lives as long as ``run``. Unlike the bare ``OpenAPIBackend`` this
    wrapper reports ``on_status``, survives any load error (not just spec errors) and a failing
    ``on_tools``, and never lets a call raise.
    """

    def __init__(
        self,
        config: OpenAPISourceConfig,
        *,
        on_status: StatusCallback | None = None,
        backoff_initial_s: float = 1.0,
        backoff_max_s: float = 300.0,
    ) -> None:
        self.name = config.name
        self.config = config
        self.on_status = on_status
        self.backoff_initial_s = backoff_initial_s
        self.backoff_max_s = backoff_max_s
        self.last_error: str | None = None
        self._impl: Any = None
        self._available = False

    def __repr__(self) -> str:
        return f"OpenAPIBackendAdapter({self.name!r}, spec={self.config.spec!r}, available={self._available})"

    @property
    def available(self) -> bool:
        return self._available

    async def run(self, on_tools: ToolsCallback) -> None:
        import httpx

        from toolweave.adapters.openapi.backend import OpenAPIBackend  # spec tooling: import late

        backoff = self.backoff_initial_s
        async with httpx.AsyncClient(follow_redirects=True) as client:
            while True:
                started = time.monotonic()
                try:
                    impl = OpenAPIBackend(self.config, client)
                    tools, edges = await impl.aload()  # CPU-bound parsing, on a worker thread
                except Exception as exc:
                    self.last_error = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
                    log.error(
                        "openapi source %r (%s): %s; retrying in %.0f s",
                        self.name,
                        self.config.spec,
                        self.last_error,
                        backoff,
                    )
                    await anyio.sleep(backoff)
                    backoff = min(backoff * 2, self.backoff_max_s)
                    continue
                log.info(
                    "openapi source %r: %d tools loaded in %.1f s",
                    self.name,
                    len(tools),
                    time.monotonic() - started,
                )
                self._impl = impl
                try:
                    await on_tools(self.name, list(tools), list(edges))
                except Exception:
                    log.exception("openapi source %r: on_tools callback failed", self.name)
                self.last_error = None
                self._available = True
                if self.on_status is not None:
                    await self.on_status(self.name, True)
                try:
                    await anyio.sleep_forever()
                finally:
                    self._available = False

    async def call(
        self,
        tool: ToolRecord,
        arguments: dict[str, Any],
        *,
        timeout_s: float | None = None,
        sampler: Sampler | None = None,
    ) -> types.CallToolResult:
        label = f"openapi source {self.name!r}, tool {tool.name!r}"
        if self._impl is None or not self._available:
            return error_result(f"{label}: unavailable ({self.last_error or 'spec not loaded yet'})")
        timeout = timeout_s or self.config.timeout_s
        try:
            # The OpenAPI backend enforces the timeout per request (with retries); this is the backstop.
            with anyio.fail_after(timeout * (self.config.retries + 1) + 1):
                result: types.CallToolResult = await self._impl.call(tool, arguments, timeout_s=timeout)
                return result
        except TimeoutError:
            return error_result(f"{label}: no answer within {timeout:g} s (call timeout)")
        except Exception as exc:
            return error_result(f"{label}: call failed: {type(exc).__name__}: {exc}")
