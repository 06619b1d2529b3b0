"""``OpenAPIBackend``: one OpenAPI source as a gateway backend (see ``toolweave.adapters.backend.Backend``).

Usage::

    backend = OpenAPIBackend(OpenAPISourceConfig(name="petstore", spec="petstore.yaml"), client)
    tools, edges = backend.load()          # sync, CPU-bound: run it off the event loop (or use aload/run)
    backend.problems                       # per-operation problems (spec file + JSON pointer)
    result = await backend.call(tool, {"petId": 1})   # mcp_types.CallToolResult, errors as is_error
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Mapping
from typing import Any, Unpack
from urllib.parse import urljoin

import anyio
import httpx
import mcp_types as types

from toolweave.adapters.backend import CallOptions, StatusCallback, ToolsCallback, call_budget
from toolweave.adapters.openapi.calls import (
    Credentials,
    build_request,
    resolve_credentials,
    response_to_result,
    send,
)
from toolweave.adapters.openapi.config import AuthConfig, OpenAPISourceConfig
from toolweave.adapters.openapi.links import spec_edges
from toolweave.adapters.openapi.loader import SpecLoader, is_url
from toolweave.adapters.openapi.oauth import TokenSource
from toolweave.adapters.openapi.parser import ParsedSpec, SpecProblem, gc_paused, parse_spec_file
from toolweave.call_errors import ErrorCode, tool_error_result
from toolweave.config_values import interpolate
from toolweave.errors import AdapterError, ConfigError, OpenAPISpecError, ToolArgumentsError
from toolweave.records import DependencyEdge, ToolRecord
from toolweave.redaction import display_url, unexpand

__all__ = ["OpenAPIBackend"]

logger = logging.getLogger(__name__)

_RELOAD_BACKOFF_S = (1.0, 5.0, 30.0, 120.0)


class OpenAPIBackend:
    """Tools, edges and calls of one OpenAPI source.

    Args:
        config: the source's configuration.
        client: the ``httpx.AsyncClient`` calls go through; one is created (and owned) if omitted.
        environ: where auth secrets are read from at call time (default ``os.environ``).
        call_timeout_s: the gateway's call budget, for calls given none (``call_budget``: the
            source's own ``timeout_s`` wins).
    """

    def __init__(
        self,
        config: OpenAPISourceConfig,
        client: httpx.AsyncClient | None = None,
        *,
        environ: Mapping[str, str] | None = None,
        on_status: StatusCallback | None = None,
        max_read_bytes: int | None = None,
        call_timeout_s: float = 60.0,
        references: Mapping[str, str] | None = None,
    ) -> None:
        self.config = config
        self._default_call_s = call_timeout_s
        # what the manifest's ${VARS} expanded to (a token in the spec URL, a host): the records say
        # ${VAR} instead, and a call expands it again (the registry is shared; the environment is not)
        self._references = dict(references or {})
        # Bytes read from one response body before it is cut while streaming (the gateway-wide
        # `max_result_bytes`); the source's `max_response_bytes` then bounds what is shown.
        self.max_read_bytes = max_read_bytes or 4 * config.max_response_bytes
        self.name = config.name
        self._client = client
        self._owns_client = client is None
        self._environ = environ if environ is not None else os.environ
        self.spec: ParsedSpec | None = None
        self.problems: list[SpecProblem] = []
        self.tools: list[ToolRecord] = []
        self.edges: list[DependencyEdge] = []
        self.on_status = on_status
        self.last_error: str | None = None
        self._tokens: TokenSource | None = None  # oauth2 sources: the kept access token

    @property
    def call_timeout_s(self) -> float | None:
        """The source's own call budget, retries included (None: the gateway's, ``call_budget``)."""
        return self.config.timeout_s

    @property
    def available(self) -> bool:
        """True once the spec is loaded (calls only need the tool's ``backend`` data and the network)."""
        return self.spec is not None

    def load(self) -> tuple[list[ToolRecord], list[DependencyEdge]]:
        """Load and convert the spec (plus Arazzo files). Sync and CPU-bound; raises ``OpenAPISpecError``
        when the document as a whole is unusable. Per-operation problems land in ``self.problems``."""
        loader = SpecLoader(allow_remote_refs=self.config.allow_remote_refs)
        parsed = parse_spec_file(
            self.config.spec,
            source=self.config.name,
            loader=loader,
            include=self.config.include,
            exclude=self.config.exclude,
        )
        with gc_paused():
            edges = spec_edges(
                parsed, arazzo=self.config.arazzo, loader=loader, infer=self.config.infer_edges
            )
        tools = [ToolRecord.model_validate(unexpand(t.model_dump(), self._references)) for t in parsed.tools]
        edges = [DependencyEdge.model_validate(unexpand(e.model_dump(), self._references)) for e in edges]
        self.spec, self.problems, self.tools, self.edges = parsed, parsed.problems, tools, edges
        logger.info(
            "openapi %s: %d tools, %d edges, %d problems from %s",
            self.name,
            len(parsed.tools),
            len(edges),
            len(parsed.problems),
            display_url(parsed.location) if is_url(parsed.location) else parsed.location,
        )
        return tools, edges

    async def aload(self) -> tuple[list[ToolRecord], list[DependencyEdge]]:
        """``load`` on a worker thread, so the event loop keeps serving."""
        return await asyncio.to_thread(self.load)

    async def run(self, on_tools: ToolsCallback) -> None:
        """Backend protocol: load (retrying with backoff if the spec cannot be read), report, then idle.

        A spec does not change under us, so after one successful load there is nothing more to report.
        Nothing here ends the gateway: load errors are retried, a failing ``on_tools`` is logged.
        """
        attempt = 0
        while True:
            try:
                tools, edges = await self.aload()
            except Exception as exc:  # a bad spec (or a bug on it) must not end the gateway
                if not isinstance(exc, OpenAPISpecError):
                    logger.exception("openapi %s: unexpected error while loading", self.name)
                self.last_error = f"{exc}" or type(exc).__name__
                delay = _RELOAD_BACKOFF_S[min(attempt, len(_RELOAD_BACKOFF_S) - 1)]
                logger.error("openapi %s: %s (retrying in %gs)", self.name, exc, delay)
                attempt += 1
                await asyncio.sleep(delay)
                continue
            self.last_error = None
            for problem in self.problems:  # operations left out: say which and why, once
                logger.warning("openapi %s: skipped %s", self.name, problem)
            try:
                await on_tools(self.name, tools, edges)
            except Exception:  # a consumer bug must not end this backend
                logger.exception("openapi %s: reporting tools failed", self.name)
            if self.on_status is not None:
                try:
                    await self.on_status(self.name, True)
                except Exception:  # a consumer bug must not end this backend
                    logger.exception("openapi %s: on_status callback failed", self.name)
            try:
                await asyncio.Event().wait()
            finally:
                await self.aclose()  # the gateway is stopping: release the HTTP connections

    def _http(self) -> httpx.AsyncClient:
        if self._client is None:
            # No redirects: httpx drops only `Authorization` when a redirect changes origin, so an API
            # key in a custom header or the query would follow a redirect to any host. A 3xx comes
            # back to the agent as an error result naming the new location instead.
            self._client = httpx.AsyncClient(follow_redirects=False)
        return self._client

    async def call(
        self, tool: ToolRecord, arguments: dict[str, Any], **options: Unpack[CallOptions]
    ) -> types.CallToolResult:
        """Call the operation behind ``tool`` (an OpenAPI operation cannot sample: no ``sampler`` use)."""
        backend = tool.backend
        if tool.source != self.name:
            return tool_error_result(
                "internal_error",
                f"openapi source {self.name!r} does not serve {tool.id} (of {tool.source!r})",
            )
        if backend.get("kind") != "openapi":
            return tool_error_result("internal_error", f"tool {tool.id} is not an OpenAPI operation")
        timeout = options.get("timeout_s") or call_budget(self.config.timeout_s, self._default_call_s)
        label = f"{backend.get('method')} {backend.get('path')}"
        try:
            server_url = backend.get("server_url")
            if isinstance(server_url, str) and "${" in server_url:  # stored with its ${VAR}: expand now
                backend = {**backend, "server_url": interpolate(server_url, self._environ, where=tool.id)}
            # Anonymous operations (`security: []`, e.g. the login that issues the token) need no secret.
            auth = None if backend.get("anonymous") else self.config.auth
            with anyio.fail_after(timeout):  # one budget for the token and every attempt
                response = await self._exchange(backend, arguments or {}, auth, timeout)
        except (ToolArgumentsError, AdapterError, ConfigError) as exc:
            code: ErrorCode = "invalid_arguments" if isinstance(exc, ToolArgumentsError) else "upstream_error"
            return tool_error_result(code, f"{tool.id}: {exc}")
        except (ValueError, TypeError) as exc:  # e.g. a non-ASCII header value, a malformed URL
            return tool_error_result(
                "invalid_arguments", f"{tool.id}: cannot build the request for {label}: {exc}"
            )
        except (httpx.TimeoutException, TimeoutError):
            return tool_error_result(
                "timeout", f"{tool.id}: {label}: no answer within {timeout:g} s (call timeout)"
            )
        except (httpx.HTTPError, httpx.InvalidURL) as exc:
            return tool_error_result(
                "upstream_error", f"{tool.id}: {label} failed: {type(exc).__name__}: {exc}"
            )
        return response_to_result(
            response,
            backend=backend,
            max_bytes=self.config.max_response_bytes,
            structured=tool.output_schema is not None,
        )

    async def _exchange(
        self, backend: Mapping[str, Any], arguments: dict[str, Any], auth: AuthConfig | None, timeout: float
    ) -> httpx.Response:
        """Build the request, send it, return the answer. With an oauth2 token, a 401 is answered by
        asking the endpoint for a new token and sending once more (a token revoked or rotated early)."""
        tokens = self._token_source(auth) if auth is not None and auth.type == "oauth2" else None
        for last in (False, True):
            token = await tokens.token(self._http()) if tokens is not None else ""
            credentials = (
                Credentials(headers={"Authorization": f"Bearer {token}"})
                if tokens is not None
                else resolve_credentials(auth, self._environ)
            )
            request = build_request(
                backend, arguments, base_url=self.config.base_url, credentials=credentials, timeout_s=timeout
            )
            response = await send(
                self._http(),
                request,
                retries=self.config.retries,
                max_body_bytes=max(self.max_read_bytes, self.config.max_response_bytes),
            )
            if last or tokens is None or response.status_code != 401:
                return response
            await response.aclose()
            tokens.forget(token)
        raise AssertionError("unreachable")  # pragma: no cover

    def _token_source(self, auth: AuthConfig) -> TokenSource:
        if self._tokens is None:
            self._tokens = TokenSource(
                self.name, auth, auth.token_url or self._spec_token_url(), self._environ
            )
        return self._tokens

    def _spec_token_url(self) -> str:
        """The ``tokenUrl`` of the spec's client-credentials flow, relative ones resolved against the
        spec's server: where ``auth: {type: oauth2}`` without ``token_url`` asks for its tokens."""
        schemes = self.spec.security_schemes if self.spec is not None else {}
        urls = {s["client_credentials_url"] for s in schemes.values() if s.get("client_credentials_url")}
        if len(urls) != 1:
            said = "no client-credentials flow" if not urls else f"{len(urls)}: {', '.join(sorted(urls))}"
            raise ConfigError(
                f"openapi source {self.name!r}: auth type oauth2 needs token_url (the spec declares {said})"
            )
        servers = [op.tool.backend.get("server_url") for op in self.spec.operations] if self.spec else []
        base = next((u for u in servers if isinstance(u, str) and u), "")
        return urljoin(self.config.base_url or base, str(urls.pop()))

    async def aclose(self) -> None:
        """Close the HTTP client if this backend created it."""
        if self._owns_client and self._client is not None:
            await self._client.aclose()
            self._client = None
