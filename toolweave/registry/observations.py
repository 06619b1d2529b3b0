"""What the gateway observes while it proxies calls, buffered in memory and written in batches.

A proxied call must not write the registry: on a shared ``s3://`` registry a write is a lease take, a
table write and a commit record (seconds), and every commit makes every other replica reload. So an
observation (a usage example, the request that led to a successful call; a sighting of value flow
between calls, ``toolweave.registry.evidence``) is a cheap append to
a bounded in-memory buffer, ``Observations``; the ``Flusher`` (``flusher.py``) writes everything
buffered in one write and one commit every ``Settings.usage_flush_s``, when the buffer fills, and at
``Registry.close``. A flush that fails (store down, lease busy) puts its batch back for the next one.
A crash loses at most what was buffered since the last flush.

The batch is built for more kinds of evidence than usage examples: each kind is a field of ``Batch``
with its own ``add_*`` on ``Observations``, and a ``Sink`` (its book) that writes its part under the
same writer lease; the flusher commits once for all of them.
"""

from __future__ import annotations

import threading
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Protocol

from toolweave.registry.evidence import Sighting
from toolweave.registry.usage import text_key

__all__ = ["MAX_BUFFERED", "Batch", "Observations", "Sink", "UsageCall"]

MAX_BUFFERED = 10_000
"""Observations of one kind held between flushes. Reaching it starts a flush; when flushes keep failing
the oldest go first (counted and logged), so memory stays bounded whatever the store does."""


@dataclass(frozen=True, slots=True)
class UsageCall:
    """A successful call of ``tool_id`` that ``query`` (the conversation's latest request) led to."""

    tool_id: str
    query: str
    at_ns: int


@dataclass
class Batch:
    """Everything observed since the last flush: written together, committed once."""

    usage: list[UsageCall] = field(default_factory=list)
    sightings: list[Sighting] = field(default_factory=list)
    """What the traffic observer saw flow between calls (the learned-edge book's part)."""

    def __len__(self) -> int:
        return len(self.usage) + len(self.sightings)


class Sink(Protocol):
    """A book that keeps one kind of observation in the registry (the usage book keeps usage calls)."""

    def prepare(self, batch: Batch) -> None:
        """Work that needs no writer lease (embedding), before the flush takes it."""

    def write(self, batch: Batch) -> bool:
        """Write this kind's part of ``batch`` to its table, under the lease, before the commit; True when
        something was written."""

    def swap_in(self) -> None:
        """After the commit: show what was written to searches (once per batch)."""


class Observations:
    """The bounded, thread-safe buffer. ``add_usage`` and ``add_sightings`` never do I/O nor raise."""

    def __init__(self, limit: int = MAX_BUFFERED) -> None:
        self._limit = limit
        self._lock = threading.Lock()
        self._usage: OrderedDict[tuple[str, str], UsageCall] = OrderedDict()
        """(tool id, text key) → the newest call with that text, oldest first."""
        self._newest: dict[str, str] = {}
        """Tool id → text key of its newest buffered call (a repeat of it is no new example)."""
        self._sightings: deque[Sighting] = deque()
        self.dropped = 0
        """Observations evicted unwritten because the buffer stayed full (flushes failing)."""
        self.on_full: Callable[[], None] = lambda: None

    def __len__(self) -> int:
        with self._lock:
            return len(self._usage) + len(self._sightings)

    def newest_usage(self, tool_id: str) -> str | None:
        """Text key of the newest buffered call of ``tool_id``."""
        with self._lock:
            return self._newest.get(tool_id)

    def add_usage(self, call: UsageCall) -> bool:
        """Buffer ``call``; False when it repeats the tool's newest buffered call."""
        key = (call.tool_id, text_key(call.query))
        with self._lock:
            if self._newest.get(call.tool_id) == key[1]:
                return False
            self._usage.pop(key, None)
            self._usage[key] = call
            self._newest[call.tool_id] = key[1]
            full = len(self._usage) >= self._limit
            while len(self._usage) > self._limit:
                self._evict_oldest()
        if full:
            self.on_full()
        return True

    def add_sightings(self, sightings: Iterable[Sighting]) -> int:
        """Buffer ``sightings``; returns how many."""
        with self._lock:
            before = len(self._sightings)
            self._sightings.extend(sightings)
            added = len(self._sightings) - before
            full = len(self._sightings) >= self._limit
            while len(self._sightings) > self._limit:
                self._sightings.popleft()
                self.dropped += 1
        if full:
            self.on_full()
        return added

    def _evict_oldest(self) -> None:
        (tool_id, key), _ = self._usage.popitem(last=False)
        if self._newest.get(tool_id) == key:
            del self._newest[tool_id]
        self.dropped += 1

    def discard(self, drop: Callable[[str], bool]) -> None:
        """Forget the buffered observations of every tool for which ``drop(tool_id)`` holds (made private)."""
        with self._lock:
            for key in [k for k in self._usage if drop(k[0])]:
                del self._usage[key]
                self._newest.pop(key[0], None)
            kept = [
                s for s in self._sightings if not drop(s.consumer) and not (s.producer and drop(s.producer))
            ]
            self._sightings = deque(kept)

    def take(self) -> Batch:
        """Everything buffered, leaving the buffer empty."""
        with self._lock:
            batch = Batch(usage=list(self._usage.values()), sightings=list(self._sightings))
            self._usage.clear()
            self._newest.clear()
            self._sightings.clear()
            return batch

    def put_back(self, batch: Batch) -> None:
        """Return a batch a flush could not write: its observations are older than any buffered since,
        which win on the same key; the bound still holds (the oldest go)."""
        with self._lock:
            newer = self._usage
            self._usage = OrderedDict(((c.tool_id, text_key(c.query)), c) for c in batch.usage)
            for key, call in newer.items():
                self._usage.pop(key, None)
                self._usage[key] = call
            for tool_id, text in self._usage:
                self._newest[tool_id] = text  # insertion order: the last one seen is the newest
            while len(self._usage) > self._limit:
                self._evict_oldest()
            self._sightings.extendleft(reversed(batch.sightings))  # older than any buffered since
            while len(self._sightings) > self._limit:
                self._sightings.popleft()
                self.dropped += 1
