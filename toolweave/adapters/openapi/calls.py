"""Calling an operation: tool arguments -> ``httpx.Request`` -> response -> MCP ``CallToolResult``.

``build_request`` is pure (it only needs the tool's ``backend`` dict, the arguments and resolved
credentials), so request building is unit-tested with ``httpx.MockTransport``; ``send`` does the I/O
through the injected ``httpx.AsyncClient`` and retries only idempotent methods.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx
import mcp_types as types

from toolweave.adapters.openapi.config import AuthConfig
from toolweave.call_errors import tool_error_result
from toolweave.errors import AdapterError, ToolArgumentsError

__all__ = [
    "IDEMPOTENT_METHODS",
    "Credentials",
    "build_request",
    "env_secret",
    "resolve_credentials",
    "response_to_result",
    "send",
]

logger = logging.getLogger(__name__)

IDEMPOTENT_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "PUT", "DELETE"})
_RETRY_STATUSES = frozenset({500, 502, 503, 504})
_ERROR_EXCERPT_CHARS = 2000


@dataclass(frozen=True)
class Credentials:
    """Auth material for one call, read from the environment at call time (never stored in records)."""

    headers: dict[str, str] = field(default_factory=dict)
    query: dict[str, str] = field(default_factory=dict)
    cookies: dict[str, str] = field(default_factory=dict)

    def __repr__(self) -> str:  # keep secrets out of logs and tracebacks
        names = (sorted(self.headers), sorted(self.query), sorted(self.cookies))
        return "Credentials(headers={}, query={}, cookies={})".format(*names)


def env_secret(environ: Mapping[str, str], name: str | None) -> str:
    """The secret in environment variable ``name``; ``AdapterError`` naming the variable when unset."""
    value = environ.get(name or "")
    if not value:
        raise AdapterError(f"environment variable {name} (configured for auth) is not set")
    return value


def resolve_credentials(auth: AuthConfig | None, environ: Mapping[str, str]) -> Credentials | None:
    """Read the configured secrets from ``environ``; raises ``AdapterError`` naming a missing variable."""
    if auth is None:
        return None
    if auth.type == "oauth2":  # a token from the endpoint, asked at call time: oauth.TokenSource
        raise AdapterError("oauth2 credentials come from the source's token endpoint, not the environment")
    if auth.type == "bearer":
        return Credentials(headers={"Authorization": f"Bearer {env_secret(environ, auth.token_env)}"})
    if auth.type == "basic":
        pair = f"{env_secret(environ, auth.username_env)}:{env_secret(environ, auth.password_env)}"
        return Credentials(headers={"Authorization": "Basic " + base64.b64encode(pair.encode()).decode()})
    key, name = env_secret(environ, auth.key_env), str(auth.name)
    if auth.location == "query":
        return Credentials(query={name: key})
    if auth.location == "cookie":
        return Credentials(cookies={name: key})
    return Credentials(headers={name: key})


# -- request building ------------------------------------------------------------------------------


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return ""
    if isinstance(value, dict | list):
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    return str(value)


def _path_value(value: Any, param: Mapping[str, Any]) -> str:
    """RFC 6570-ish expansion of one path parameter, each piece percent-encoded (``/`` included)."""
    style, explode, name = param.get("style", "simple"), bool(param.get("explode")), param["name"]

    def enc(v: Any) -> str:
        return urllib.parse.quote(_scalar(v), safe="")

    if isinstance(value, list):
        items = [enc(v) for v in value]
        if style == "label":
            return "." + ("." if explode else ",").join(items)
        if style == "matrix":
            return "".join(f";{name}={i}" for i in items) if explode else f";{name}=" + ",".join(items)
        return ",".join(items)
    if isinstance(value, dict):
        pairs = [(enc(k), enc(v)) for k, v in value.items()]
        joined = ",".join(f"{k}={v}" for k, v in pairs) if explode else ",".join(f"{k},{v}" for k, v in pairs)
        if style == "label":
            return "." + joined
        if style == "matrix":
            return ";" + joined if explode else f";{name}=" + joined
        return joined
    if style == "label":
        return "." + enc(value)
    if style == "matrix":
        return f";{name}={enc(value)}"
    return enc(value)


def _query_pairs(value: Any, param: Mapping[str, Any]) -> list[tuple[str, str]]:
    name, style, explode = param["name"], param.get("style", "form"), bool(param.get("explode", True))
    if param.get("content_type"):
        return [(name, json.dumps(value, separators=(",", ":"), ensure_ascii=False))]
    if isinstance(value, list):
        if style == "form" and explode:
            return [(name, _scalar(v)) for v in value]
        separator = {"spaceDelimited": " ", "pipeDelimited": "|", "tabDelimited": "\t"}.get(style, ",")
        return [(name, separator.join(_scalar(v) for v in value))]
    if isinstance(value, dict):
        if style == "deepObject":
            return [(f"{name}[{k}]", _scalar(v)) for k, v in value.items()]
        if explode:
            return [(str(k), _scalar(v)) for k, v in value.items()]
        return [(name, ",".join(f"{k},{_scalar(v)}" for k, v in value.items()))]
    return [(name, _scalar(value))]


def _header_value(value: Any, param: Mapping[str, Any]) -> str:
    if isinstance(value, list):
        return ",".join(_scalar(v) for v in value)
    if isinstance(value, dict):
        sep = "=" if param.get("explode") else ","
        return ",".join(f"{k}{sep}{_scalar(v)}" for k, v in value.items())
    return _scalar(value)


def build_request(
    backend: Mapping[str, Any],
    arguments: Mapping[str, Any],
    *,
    base_url: str | None = None,
    credentials: Credentials | None = None,
    timeout_s: float = 30.0,
) -> httpx.Request:
    """Build the HTTP request for one call. Raises ``ToolArgumentsError`` / ``AdapterError`` on bad input.

    ``base_url`` overrides the spec's server. Arguments not named in the schema are ignored, except
    when the tool has a body and no ``body`` argument was given: then they are taken as the body's
    fields (clients that flatten the body still work).
    """
    method = str(backend["method"]).upper()
    path = str(backend["path"])
    url_base = base_url or backend.get("server_url")
    if not url_base or not url_base.startswith(("http://", "https://")):
        raise AdapterError(
            f"no absolute base URL for {method} {path} (spec server: {backend.get('server_url')!r}); "
            "set base_url in the source config"
        )
    params = backend.get("parameters") or []
    query: list[tuple[str, str | int | float | bool | None]] = []  # httpx's query value types
    headers: dict[str, str] = {}
    cookies: dict[str, str] = {}
    known = {p["property"] for p in params}
    for param in params:
        prop, location = param["property"], param["in"]
        if prop not in arguments or arguments[prop] is None:
            if location == "path":
                raise ToolArgumentsError(f"missing required path parameter {prop!r} for {method} {path}")
            continue
        value = arguments[prop]
        if location == "path":
            path = path.replace("{" + str(param["name"]) + "}", _path_value(value, param))
        elif location == "query":
            query += _query_pairs(value, param)
        elif location == "header":
            headers[str(param["name"])] = _header_value(value, param)
        elif location == "cookie":
            cookies[str(param["name"])] = _header_value(value, param)

    content: bytes | None = None
    data: dict[str, Any] | None = None
    files: list[tuple[str, Any]] | None = None
    body_info = backend.get("body")
    if body_info:
        prop = body_info.get("property", "body")
        body = arguments.get(prop)
        if body is None:
            leftovers = {k: v for k, v in arguments.items() if k not in known and k != prop}
            body = leftovers or None
        if body is None and body_info.get("required"):
            raise ToolArgumentsError(f"missing required request body {prop!r} for {method} {path}")
        if body is not None:
            content_type = str(body_info.get("content_type") or "application/json")
            content, data, files = _encode_body(body, content_type, body_info.get("file_fields") or [])
            if content is not None:
                headers["Content-Type"] = content_type

    if credentials is not None and not backend.get("anonymous"):
        headers.update(credentials.headers)
        query += list(credentials.query.items())
        cookies.update(credentials.cookies)
    if cookies:
        # A Cookie header, not httpx's cookie jar: per-request jars are deprecated and leak across calls.
        headers["Cookie"] = "; ".join(f"{k}={urllib.parse.quote(v, safe='')}" for k, v in cookies.items())
    headers.setdefault("Accept", "application/json, */*;q=0.5")
    return httpx.Request(
        method,
        url_base.rstrip("/") + path,
        params=query or None,
        headers=headers,
        content=content,
        data=data,
        files=files,
        extensions={"timeout": httpx.Timeout(timeout_s).as_dict()},
    )


def _encode_body(
    body: Any, content_type: str, file_fields: list[str]
) -> tuple[bytes | None, dict[str, Any] | None, list[tuple[str, Any]] | None]:
    base = content_type.split(";")[0].strip().lower()
    if base == "application/x-www-form-urlencoded":
        if not isinstance(body, dict):
            return _scalar(body).encode(), None, None
        return urllib.parse.urlencode(_form_fields(body), doseq=True).encode(), None, None
    if base.startswith("multipart/"):
        if not isinstance(body, dict):
            raise ToolArgumentsError("a multipart body must be an object of fields")
        # Plain fields as `(None, value)` parts: with only `data=`, httpx would send a urlencoded form.
        parts: list[tuple[str, Any]] = []
        for key, value in body.items():
            if value is None:
                continue
            if key in file_fields:
                parts.append((key, _file_part(key, value)))
            elif isinstance(value, list):
                parts += [(key, (None, _scalar(v))) for v in value]
            else:
                parts.append((key, (None, _scalar(value))))
        return None, None, parts
    if base.endswith("json") or base == "*/*":
        return json.dumps(body, ensure_ascii=False).encode(), None, None
    if isinstance(body, str):
        return body.encode(), None, None
    if isinstance(body, bytes):
        return body, None, None
    return json.dumps(body, ensure_ascii=False).encode(), None, None


def _form_fields(body: Mapping[str, Any]) -> dict[str, Any]:
    return {
        str(k): [_scalar(i) for i in v] if isinstance(v, list) else _scalar(v)
        for k, v in body.items()
        if v is not None
    }


def _file_part(name: str, value: Any) -> tuple[str, bytes, str]:
    """A file field: a string (the content), or ``{filename, content | content_base64, content_type}``."""
    if isinstance(value, dict):
        filename = str(value.get("filename") or name)
        if "content_base64" in value:
            raw = base64.b64decode(str(value["content_base64"]))
        else:
            raw = _scalar(value.get("content", "")).encode()
        return filename, raw, str(value.get("content_type") or "application/octet-stream")
    raw = value if isinstance(value, bytes) else _scalar(value).encode()
    return name, raw, "application/octet-stream"


# -- sending ---------------------------------------------------------------------------------------


async def send(
    client: httpx.AsyncClient,
    request: httpx.Request,
    *,
    retries: int = 2,
    backoff_s: float = 0.2,
    max_body_bytes: int | None = None,
) -> httpx.Response:
    """Send, retrying idempotent methods on connect errors and 5xx (never POST/PATCH: not safe to repeat).

    With ``max_body_bytes`` the body is streamed and at most that much is kept in memory (a huge
    response must not take the gateway down); the full size is counted, up to ``DRAIN_LIMIT``, and
    recorded in the response's ``extensions[TOTAL_BYTES]``.
    """
    attempts = retries + 1 if request.method in IDEMPOTENT_METHODS else 1
    for attempt in range(attempts):
        last = attempt == attempts - 1
        try:
            response = await client.send(request, stream=max_body_bytes is not None)
        except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
            if last:
                raise
            logger.info("openapi call %s %s: %s; retrying", request.method, _safe_url(request), exc)
        else:
            if response.status_code not in _RETRY_STATUSES or last:
                if max_body_bytes is None:
                    return response
                return await _read_bounded(response, max_body_bytes, request)
            await response.aclose()
            logger.info(
                "openapi call %s %s: HTTP %s; retrying",
                request.method,
                _safe_url(request),
                response.status_code,
            )
        await asyncio.sleep(backoff_s * (2**attempt))
    raise AssertionError("unreachable")  # pragma: no cover


TOTAL_BYTES = "toolweave.total_bytes"
"""Response extension: the body's full size when only part of it was kept."""
DRAIN_LIMIT = 64 * 1024 * 1024
"""Past this, a body is not even counted to the end (the note then says "at least")."""
_FRAMING_HEADERS = frozenset({"content-encoding", "content-length", "transfer-encoding"})


async def _read_bounded(response: httpx.Response, keep: int, request: httpx.Request) -> httpx.Response:
    kept = bytearray()
    total = 0
    try:
        async for chunk in response.aiter_bytes():
            total += len(chunk)
            if len(kept) < keep:
                kept += chunk[: keep - len(kept)]
            if total >= DRAIN_LIMIT:
                break
    finally:
        await response.aclose()
    # a plain response over the kept (already decoded) bytes, so the result code reads it as usual
    headers = [(k, v) for k, v in response.headers.multi_items() if k.lower() not in _FRAMING_HEADERS]
    return httpx.Response(
        response.status_code,
        headers=headers,
        content=bytes(kept),
        request=request,
        extensions={**response.extensions, TOTAL_BYTES: total},
    )


def _safe_url(request: httpx.Request) -> str:
    """The URL without its query: an API key may be a query parameter."""
    return str(request.url.copy_with(query=None))


# -- results ---------------------------------------------------------------------------------------


def _is_json(content_type: str) -> bool:
    base = content_type.split(";")[0].strip().lower()
    return base.endswith("/json") or base.endswith("+json")


def _is_text(content_type: str) -> bool:
    base = content_type.split(";")[0].strip().lower()
    return (
        base.startswith("text/")
        or base.endswith(("xml", "javascript", "yaml", "csv", "x-www-form-urlencoded"))
        or not base
    )


def response_to_result(
    response: httpx.Response,
    *,
    backend: Mapping[str, Any],
    max_bytes: int,
    structured: bool = True,
) -> types.CallToolResult:
    """2xx -> pretty JSON or text (truncated with a note past ``max_bytes``); else an error result."""
    raw = response.content
    total = int(response.extensions.get(TOTAL_BYTES, len(raw)))
    size = f"{total:,}" if total < DRAIN_LIMIT else f"at least {total:,}"
    content_type = response.headers.get("content-type", "")
    request = response.request
    if response.is_success and total > len(raw):  # cut while reading: too big to parse, show the start
        head = raw[:max_bytes].decode(errors="ignore")
        note = f"\n\n[truncated: showing the first {min(max_bytes, len(raw)):,} of {size} bytes as received]"
        return types.CallToolResult(content=[types.TextContent(text=head + note)])
    if response.is_success:
        if not raw:
            return types.CallToolResult(
                content=[
                    types.TextContent(
                        text=f"HTTP {response.status_code} {response.reason_phrase} (empty body)"
                    )
                ]
            )
        if not (_is_json(content_type) or _is_text(content_type)):
            note = f"binary response: {len(raw)} bytes of {content_type or 'unknown type'} (not shown)"
            return types.CallToolResult(content=[types.TextContent(text=note)])
        data: Any = None
        parsed = False
        if _is_json(content_type) or raw[:1] in (b"{", b"["):
            try:
                data = json.loads(raw)
                parsed = True
            except ValueError:
                parsed = False
        text = json.dumps(data, indent=2, ensure_ascii=False) if parsed else response.text
        encoded = text.encode()
        if len(encoded) > max_bytes:
            head = encoded[:max_bytes].decode(errors="ignore")
            note = (
                f"\n\n[truncated: showing the first {max_bytes:,} of {len(encoded):,} bytes "
                f"({len(raw):,} bytes as received)]"
            )
            return types.CallToolResult(content=[types.TextContent(text=head + note)])
        structured_content = None
        if structured and parsed:
            if backend.get("output_wrapped"):
                structured_content = {"result": data}
            elif isinstance(data, dict):
                structured_content = data
        return types.CallToolResult(
            content=[types.TextContent(text=text)], structured_content=structured_content
        )
    excerpt = response.text[:_ERROR_EXCERPT_CHARS] if raw else ""
    more = f"\n[… {size} bytes in all]" if total > _ERROR_EXCERPT_CHARS else ""
    message = (
        f"HTTP {response.status_code} {response.reason_phrase} from {request.method} {_safe_url(request)}"
    )
    if excerpt:
        message += f"\n{excerpt}{more}"
    return tool_error_result("upstream_error", message)
