"""Micro-batching of query embeddings: concurrent ``find_tools`` turns share one model run.

Each ``find_tools`` runs retrieval in a worker thread, and each used to run the model for its own
query: under 50 concurrent sessions that is 50 small model runs fighting for 2 cores. ``QueryBatcher``
wraps the embedder: the first thread to arrive becomes the leader, waits ``window_s`` only when other
requests are in flight, then embeds every query queued so far in one run and hands each thread its
vectors; threads that arrive meanwhile queue for the next run. Model runs are serialised, which also
keeps the embedder's (unsynchronised) query cache consistent. Everything else is delegated.

Queries whose vectors are all in the embedder's cache skip the queue: they used to wait for the model
run in progress (a batch of 30 new queries takes 150-300 ms on the shared 2-core machine) although
they need no model at all, and a new query is looked up twice per turn (the topic-shift check, then
the search). The cache is read without reordering it (``cached_queries``), so a hit taken this way does
not refresh the entry's recency in the embedder's LRU.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["QueryBatcher"]


@dataclass
class _Job:
    texts: Sequence[str]
    vectors: list[np.ndarray] = field(default_factory=list)
    error: BaseException | None = None
    done: bool = False


class QueryBatcher:
    """Wraps an embedder; ``embed_queries`` from many threads becomes few model runs."""

    def __init__(self, embedder: Any, window_s: float = 0.002) -> None:
        self._embedder = embedder
        self._window_s = window_s
        self._cond = threading.Condition()
        self._pending: list[_Job] = []
        self._running = False
        self._inflight = 0
        self.runs = 0
        """Model runs made (for tests and benchmarks: fewer than calls means batching happened)."""

    def __getattr__(self, name: str) -> Any:
        return getattr(self._embedder, name)

    def embed_query(self, text: str) -> np.ndarray:
        return self.embed_queries([text])[0]

    def embed_queries(self, texts: Sequence[str]) -> list[np.ndarray]:
        cached = getattr(self._embedder, "cached_queries", None)
        if cached is not None and (vectors := cached(texts)) is not None:
            return list(vectors)  # every vector known: no model run to wait for (module docstring)
        job = _Job(list(texts))
        with self._cond:
            self._inflight += 1
            self._pending.append(job)
            while not job.done and self._running:
                self._cond.wait()
            if not job.done:
                self._running = True  # this thread leads the next run
            crowded = self._inflight > 1
        try:
            if not job.done:
                self._lead(crowded)
        finally:
            with self._cond:
                self._inflight -= 1
        if job.error is not None:
            raise job.error
        return job.vectors

    def _lead(self, crowded: bool) -> None:
        if crowded and self._window_s > 0:
            time.sleep(self._window_s)  # let concurrent turns join this run
        with self._cond:
            batch, self._pending = self._pending, []
        try:
            unique = list(dict.fromkeys(t for job in batch for t in job.texts))
            vectors = dict(zip(unique, self._embedder.embed_queries(unique), strict=True))
            self.runs += 1
            for job in batch:
                job.vectors = [vectors[t] for t in job.texts]
        except BaseException as exc:  # every waiting turn gets the error, none hangs
            for job in batch:
                job.error = exc
            raise
        finally:
            with self._cond:
                for job in batch:
                    job.done = True
                self._running = False
                self._cond.notify_all()
