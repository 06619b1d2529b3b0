"""A small LRU cache of retrieval results for ``find_tools``, with in-flight coalescing.

Clients re-ask (a model repeats ``find_tools`` for the same task, many sessions ask the same thing):
the ranked list depends only on the query, the session's context, the retrieval parameters, the
excluded sources and the registry's content. The gateway builds the key from the first four and
clears the cache whenever the registry changes (an ingest or new edges). Concurrent identical
requests wait for the first one instead of computing the same ranking again.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, TypeVar

import anyio

__all__ = ["FindCache"]

T = TypeVar("T")


class FindCache(Generic[T]):
    def __init__(self, size: int) -> None:
        self.size = size
        self._items: OrderedDict[Hashable, T] = OrderedDict()
        self._inflight: dict[Hashable, anyio.Event] = {}
        self.hits = 0
        self.misses = 0
        self._generation = 0

    def clear(self) -> None:
        self._items.clear()
        self._generation += 1  # answers computed before the clear are not stored

    def holds(self, key: Hashable) -> bool:
        """An answer for ``key`` is stored or being computed."""
        return key in self._items or key in self._inflight

    async def get(self, key: Hashable, compute: Callable[[], Awaitable[T]]) -> T:
        if self.size <= 0:
            return await compute()
        while True:
            if key in self._items:
                self.hits += 1
                self._items.move_to_end(key)
                return self._items[key]
            pending = self._inflight.get(key)
            if pending is None:
                break
            await pending.wait()  # the same request is being computed: share its answer
            if key not in self._items:  # it failed or was cleared: compute our own
                break
        self.misses += 1
        done = self._inflight[key] = anyio.Event()
        generation = self._generation
        try:
            value = await compute()
            if generation != self._generation:
                return value
            self._items[key] = value
            while len(self._items) > self.size:
                self._items.popitem(last=False)
            return value
        finally:
            if self._inflight.get(key) is done:
                del self._inflight[key]
            done.set()
