"""A store that hangs or refuses: one log line per outage, no traceback, and a back-off that keeps the
request path from waiting on it again and again.

An object store (or Redis) can refuse connections, answer slowly, or hang (a paused process, a network
black hole). What a request needs from it has a deadline; when the deadline passes or the call fails,
``Outage.failed`` logs one warning (the first failure of the outage, with its cause in one line) and
``Outage.skip`` says to answer from memory without asking the store until a probe is due (back-off
doubling from ``RETRY_MIN_S`` to ``RETRY_MAX_S``). The first success logs that the store is back.
"""

from __future__ import annotations

import logging
import threading
import time

__all__ = ["Outage"]

RETRY_MIN_S = 1.0
RETRY_MAX_S = 15.0


class Outage:
    """The state of one dependency of the request path (thread-safe)."""

    def __init__(self, log: logging.Logger, failed: str, back: str) -> None:
        self._log = log
        self._failed = failed
        """Logged once when an outage starts: "... %s" gets the cause."""
        self._back = back
        self._lock = threading.Lock()
        self.down = False
        self._probe_at = 0.0
        self._backoff = RETRY_MIN_S

    def skip(self) -> bool:
        """Whether to leave the store alone now (down, and no probe due); a due probe is let through."""
        with self._lock:
            if not self.down:
                return False
            now = time.monotonic()
            if now < self._probe_at:
                return True
            self._probe_at = now + self._backoff  # one probe at a time
            return False

    def failed(self, cause: BaseException | str) -> None:
        with self._lock:
            first = not self.down
            self.down = True
            self._probe_at = time.monotonic() + self._backoff
            self._backoff = min(self._backoff * 2, RETRY_MAX_S)
        if first:
            reason = cause if isinstance(cause, str) else f"{type(cause).__name__}: {cause}"
            self._log.warning(self._failed, " ".join(str(reason).split())[:300])

    def succeeded(self) -> None:
        with self._lock:
            was = self.down
            self.down = False
            self._backoff = RETRY_MIN_S
        if was:
            self._log.warning(self._back)
