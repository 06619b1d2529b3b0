"""The audit log: one JSON line per ``find_tools`` and per call, in a rotated file.

Each line: ``time`` (UTC, ISO 8601), ``identity``, ``session``, ``kind`` (``find_tools`` | ``call``),
``tool``, ``outcome`` (``ok`` or the error code), ``latency_ms``, ``argument_keys``. Argument values are
recorded only with ``security.audit_values``, and even then values under secret-looking keys are
replaced by ``***`` and URL credentials are redacted; a find_tools query is cut to a short prefix.
Written by a dedicated logger that does not propagate, so audit lines never mix with stderr logs.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from logging.handlers import RotatingFileHandler
from pathlib import Path
from typing import Any

from toolweave.redaction import redact

__all__ = ["AuditLog"]

_SECRET_KEY = re.compile(
    r"pass(word|wd)?|secret|token|api[_-]?key|auth|credential|private|cookie|session", re.I
)
_MAX_VALUE_CHARS = 200


def _safe_value(key: str, value: Any) -> Any:
    if _SECRET_KEY.search(key):
        return "***"
    if isinstance(value, Mapping):
        return {str(k): _safe_value(str(k), v) for k, v in value.items()}
    if isinstance(value, list):
        return [_safe_value(key, v) for v in value[:20]]
    if isinstance(value, str):
        return redact(value[:_MAX_VALUE_CHARS])
    return value


class AuditLog:
    """Append-only JSONL with size-based rotation (``path``, ``path.1`` ... ``path.N``)."""

    def __init__(
        self, path: Path, *, values: bool = False, max_bytes: int = 10_000_000, backups: int = 5
    ) -> None:
        path = path.expanduser()
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.values = values
        self._logger = logging.getLogger(f"toolweave.audit.{id(self)}")
        self._logger.propagate = False
        self._logger.setLevel(logging.INFO)
        self._handler = RotatingFileHandler(path, maxBytes=max_bytes, backupCount=backups, encoding="utf-8")
        self._handler.setFormatter(logging.Formatter("%(message)s"))
        self._logger.addHandler(self._handler)

    def record(
        self,
        *,
        kind: str,
        identity: str,
        session: str,
        tool: str,
        outcome: str,
        latency_s: float,
        arguments: Mapping[str, Any] | None,
    ) -> None:
        entry: dict[str, Any] = {
            "time": datetime.now(UTC).isoformat(timespec="milliseconds"),
            "identity": identity,
            "session": session,
            "kind": kind,
            "tool": tool,
            "outcome": outcome,
            "latency_ms": round(latency_s * 1000, 2),
            "argument_keys": sorted(str(k) for k in (arguments or {})),
        }
        if self.values and arguments:
            entry["arguments"] = {str(k): _safe_value(str(k), v) for k, v in arguments.items()}
        self._logger.info(json.dumps(entry, ensure_ascii=False, default=str))

    def close(self) -> None:
        self._logger.removeHandler(self._handler)
        self._handler.close()
