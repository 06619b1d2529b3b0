"""Keep the cyclic garbage collector off the objects a started gateway lives on (``gc.freeze``).

CPython's oldest-generation collection walks every tracked object the process holds: the MCP SDK,
pydantic, LanceDB and the registry's records are some 250,000 of them once the gateway has started.
Under 50 concurrent sessions each ``find_tools`` allocates enough (request, answer, pydantic models)
to trigger one such collection every 1-4 s, and each one stopped the event loop (and every worker
thread holding the GIL) for 150-770 ms on the shared 2-core machine: every session's request in
flight waited for it (bench/HISTORY.md). Nearly all of those objects live as long as the
process, so once the start is over they are frozen: later full collections walk only what was
allocated since (7-14 ms measured).

Frozen objects are never freed by the cycle collector (reference counting still frees them): only
what exists when the start is over is frozen, and objects created later (new sessions, an upstream's
re-ingested tools) are collected as usual. No full collection runs first: it would itself stop the
event loop for 100-150 ms while the first clients may already be served (instant start), and found
~200 unreachable objects when measured; those few stay allocated, once. Likewise, whatever the start
made and a later change replaces (a reloaded registry snapshot, re-ingested records) stays allocated
if it is part of a reference cycle; without a cycle, reference counting frees it as before.
Only the HTTP transports use it (``transports.py``), where many sessions share one process; a stdio
gateway serves one client, far below that request rate (not measured there).
"""

from __future__ import annotations

import gc
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Protocol

import anyio

__all__ = ["frozen_once_started"]

log = logging.getLogger(__name__)


class _Starting(Protocol):
    @property
    def warmed(self) -> anyio.Event: ...


async def _freeze_when_started(gateway: _Starting) -> None:
    await gateway.warmed.wait()
    gc.freeze()
    log.debug("heap frozen after the start: %d objects", gc.get_freeze_count())


@asynccontextmanager
async def frozen_once_started(gateway: _Starting) -> AsyncIterator[None]:
    """While inside, freeze the heap as soon as ``gateway`` has started (module docstring)."""
    async with anyio.create_task_group() as tg:
        tg.start_soon(_freeze_when_started, gateway)
        try:
            yield
        finally:
            tg.cancel_scope.cancel()
