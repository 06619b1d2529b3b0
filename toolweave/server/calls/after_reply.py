"""What a successful call teaches, done once its reply is on its way to the client.

The usage example and the traffic observer's work (``CallPath._learn``: keyed hashes of the result's
values, the sightings its arguments make) changed nothing the client could see: they only fill the
registry's buffer, which the flusher writes on its cadence. Done before the reply, they were a sixth of
the gateway's work on a proxied call's path (bench/RESULTS.md, "The loop's own cost"). ``AfterReply``
keeps each success in a queue and runs the queue, in order, once the reply was handed to the wire:

* the stdio relay runs it right after writing its answer line (``CallRelay._serve``);
* the SDK path schedules it on the loop once the wire reports the reply written (``WrittenReplies``:
  stdio's writer took it, an HTTP response was sent), or on the loop's next turn where the transport
  cannot say (in process): a turn later than the reply's own write, which was scheduled first;
* at shutdown whatever is still queued runs before the registry's last flush (``Gateway.running``).

Calls of one session are learned in the order they succeeded (one queue, first in first out), so the
observer still matches a call's arguments against the results before it. A queue that nothing drains
(replies never reported written) is bounded: past ``MAX_PENDING`` the oldest are learned at once.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable
from typing import Generic, TypeVar

__all__ = ["MAX_PENDING", "AfterReply"]

log = logging.getLogger(__name__)

MAX_PENDING = 256
"""Successes waiting for their reply's write; beyond this the oldest are learned without waiting."""

T = TypeVar("T")


class AfterReply(Generic[T]):
    """Successes queued until their replies are written, then handed to ``learn`` (module docstring)."""

    def __init__(self, learn: Callable[[T], None]) -> None:
        self._learn = learn
        self._pending: deque[T] = deque()
        self._scheduled = False

    def __len__(self) -> int:
        return len(self._pending)

    def add(self, item: T) -> None:
        """Queue ``item``; whoever sends its reply calls ``run`` or ``run_soon`` once it did."""
        self._pending.append(item)
        while len(self._pending) > MAX_PENDING:
            self._run_one(self._pending.popleft())

    def run(self) -> None:
        """Learn from everything queued, oldest first (nothing raises: learning must not break serving)."""
        self._scheduled = False
        pending = self._pending
        while pending:
            self._run_one(pending.popleft())

    def run_soon(self) -> None:
        """``run`` on the event loop's next turn (once per turn, however many replies ask for it): after
        the steps already scheduled, such as the writer's that takes the reply to the wire."""
        if self._scheduled or not self._pending:
            return
        try:
            asyncio.get_running_loop().call_soon(self.run)
        except RuntimeError:  # no loop (a stop in progress): now, rather than never
            self.run()
            return
        self._scheduled = True

    def _run_one(self, item: T) -> None:
        try:
            self._learn(item)
        except Exception:  # a bug in learning must cost the lesson, never the gateway
            log.exception("could not learn from a successful call")
