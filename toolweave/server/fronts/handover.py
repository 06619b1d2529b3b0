"""What the early stdio front hands the MCP SDK server when it stops (``server/fronts/early.py``): the lines
it read, in order, and what it answered, so the SDK builds the same session state as if it had answered
them itself (``server/fronts/transports.py``). Standard library only."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any, BinaryIO

__all__ = ["EARLY_ID_PREFIX", "Era", "Handover"]

EARLY_ID_PREFIX = "io.toolweave/early-"
"""Replayed requests carry ids ``io.toolweave/early-<n>``: the SDK's replies to them are recognised by it."""


class Era(Enum):
    HANDSHAKE = "handshake"
    MODERN = "2026-07-28"


@dataclass
class Handover:
    """What the front read and answered, for the SDK server to continue from."""

    prefix: bytes
    """The lines the SDK must read before fd 0, in the order they came: answered requests (private ids),
    the rest verbatim."""
    answered: dict[str, tuple[str, dict[str, Any]]] = field(default_factory=dict)
    """Private id -> (method, reply sent to the client: ``{"result": ...}`` or ``{"error": ...}``)."""
    listens: dict[str | int, dict[str, Any]] = field(default_factory=dict)
    """``subscriptions/listen`` request id -> the acknowledgement params sent for it."""
    era: Era | None = None

    def reader(self, rest: BinaryIO) -> _PrefixedLines:
        """A line reader over ``prefix`` then ``rest`` (the process's stdin)."""
        return _PrefixedLines(self.prefix, rest)


class _PrefixedLines:
    """``readline(limit)`` over a byte prefix, then a stream: what ``bounded_stdio_server`` reads."""

    def __init__(self, prefix: bytes, rest: BinaryIO) -> None:
        self._prefix = prefix
        self._rest = rest

    def readline(self, limit: int = -1) -> bytes:
        if not self._prefix:
            return self._rest.readline(limit)
        end = self._prefix.find(b"\n")
        size = len(self._prefix) if end < 0 else end + 1
        if limit >= 0:
            size = min(size, limit)
        line, self._prefix = self._prefix[:size], self._prefix[size:]
        if line.endswith(b"\n") or self._prefix or len(line) == limit:
            return line
        # the prefix ended inside a line: the rest of it is still in the pipe
        return line + self._rest.readline(-1 if limit < 0 else limit - len(line))
