"""Secrets out of logs: URL credentials and secret query parameters are masked wherever anything logs.

``RedactingFilter`` sits on the root logger's handlers (``install``), so it also covers the MCP SDK and
httpx, which log upstream URLs at DEBUG level. It formats the record once, masks ``user:secret@host`` and
``?api_key=...``-style parameters, values of secret-named fields (``'password': '...'`` in the
message reprs the SDK logs) and ``Authorization: Bearer ...`` values, and hands on the masked text.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

__all__ = ["RedactingFilter", "conceal", "display_url", "install", "redact", "unexpand"]

_USERINFO = re.compile(r"(?P<scheme>\b[a-zA-Z][a-zA-Z0-9+.-]*://)(?P<user>[^/\s:@]*):(?P<secret>[^/\s@]+)@")
_PARAM = re.compile(
    r"(?P<key>[?&;](?:[\w.-]*?(?:api[_-]?key|apikey|token|secret|password|passwd|pwd|auth|signature|sig|"
    r"key|access[_-]?key|client[_-]?secret|code|credential)[\w.-]*)=)(?P<value>[^&#\s\"'<>]+)",
    re.IGNORECASE,
)
# 'password': 'x' / "api_key":"x" / token=x in reprs and JSON of messages the SDK logs at DEBUG
# ... also JSON inside JSON (an SSE chunk's ``\\"access_token\\": \\"...\\"``): quotes may be escaped
_FIELD = re.compile(
    r"(?P<key>(?P<q>\\*['\"]?)[\w-]*(?:password|passwd|secret|token|api[_-]?key|apikey|credential)[\w-]*"
    r"(?P=q)\s*[:=]\s*)(?P<open>\\*['\"])(?P<value>[^'\"\\]+)(?P=open)",
    re.IGNORECASE,
)
_JSONRPC = re.compile(r"""\\*["']jsonrpc\\*["']""")
_METHOD = re.compile(r"""\\*["']method\\*["']\s*:\s*\\*["'](?P<method>[\w/.$-]{1,80})""")
_BEARER = re.compile(r"(?P<key>\b(?:Bearer|Basic|Token)\s+)(?P<value>[A-Za-z0-9._~+/=-]{8,})")
MASK = "***"


def display_url(url: str) -> str:
    """``url`` without credentials or query (which may hold a password): safe for any log line."""
    try:
        parts = urlsplit(url)
        port = f":{parts.port}" if parts.port else ""
        return f"{parts.scheme}://{parts.hostname or ''}{port}{parts.path}"
    except ValueError:  # not a parsable URL: say nothing about it
        return "(unparsable URL)"


def unexpand(value: Any, references: Mapping[str, str]) -> Any:
    """``value`` (strings, or dicts and lists of them, e.g. a tool record's data) with every value a
    ``${VAR}`` expanded to put back as its reference (``config_values.references``): what an adapter
    built from an expanded entry (a spec URL with ``?token=${TOKEN}``, a base URL) is stored with the
    reference only. Longest values first, so a value inside another does not split it."""
    if not references:
        return value
    ordered = sorted(references.items(), key=lambda kv: -len(kv[0]))

    def clean(item: Any) -> Any:
        if isinstance(item, str):
            for raw, ref in ordered:
                if raw in item:
                    item = item.replace(raw, ref)
            return item
        if isinstance(item, dict):
            return {clean(k): clean(v) for k, v in item.items()}
        if isinstance(item, list | tuple):
            return type(item)(clean(v) for v in item)
        return item

    return clean(value)


_CONCEALED: dict[str, str] = {}
"""Values the manifest's ``${VARS}`` expanded to, each to its reference: masked in every log line."""


def conceal(references: Mapping[str, str]) -> None:
    """Mask these values (``config_values.references``) as their ``${VAR}`` in every log line from now
    on, whoever logs them (httpx logs a spec URL's path, the SDK a stdio server's arguments)."""
    _CONCEALED.update(references)


def redact(text: str) -> str:
    """``text`` with URL passwords, secret query parameters and bearer credentials masked, and every
    value a manifest's ``${VAR}`` expanded to (``conceal``) put back as its reference."""
    if _CONCEALED:
        text = unexpand(text, _CONCEALED)
    if "://" in text:
        text = _USERINFO.sub(lambda m: f"{m['scheme']}{m['user']}:{MASK}@", text)
    if "=" in text:
        text = _PARAM.sub(lambda m: f"{m['key']}{MASK}", text)
    if ":" in text or "=" in text:
        text = _FIELD.sub(lambda m: f"{m['key']}{m['open']}{MASK}{m['open']}", text)
    if "Bearer" in text or "Basic" in text or "Token" in text:
        text = _BEARER.sub(lambda m: f"{m['key']}{MASK}", text)
    return text


def _without_payload(message: str) -> str:
    """A third-party DEBUG line carrying an MCP message (the SDK's, ``sse_starlette``'s chunks) without
    the message: its arguments and results are what users and upstreams sent, and logs keep none."""
    found = _JSONRPC.search(message)
    if found is None:
        return message
    start = message.rfind("{", 0, found.start())
    start = found.start() if start < 0 else start
    method = _METHOD.search(message, start)
    what = f", method {method['method']}" if method else ""
    return f"{message[:start]}<MCP message of {len(message) - start} characters{what}: content not logged>"


class RedactingFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a broken format string: let the handler report it as usual
            return True
        masked = redact(message)
        if record.levelno <= logging.DEBUG and not record.name.startswith("toolweave"):
            masked = _without_payload(masked)
        if masked != message:
            record.msg, record.args = masked, ()
        if record.exc_info and not record.exc_text:
            record.exc_text = redact(logging.Formatter().formatException(record.exc_info))
        elif record.exc_text:
            record.exc_text = redact(record.exc_text)
        return True


def install(logger: logging.Logger | None = None) -> None:
    """Put one ``RedactingFilter`` on every handler of ``logger`` (default: root)."""
    target = logger or logging.getLogger()
    for handler in target.handlers:
        if not any(isinstance(f, RedactingFilter) for f in handler.filters):
            handler.addFilter(RedactingFilter())
