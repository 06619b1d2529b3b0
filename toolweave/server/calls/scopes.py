"""Cancel scopes, deadlines and the clock on a proxied call's path, at the least cost per call.

``anyio.CancelScope()`` and ``anyio.current_time()`` ask sniffio which async library runs on every call
(a context variable, the running task, the backend look-up): 19 and 17 profiler events each, several
times per proxied call (bench/RESULTS.md, "The loop's own cost"). The gateway runs on anyio's asyncio
backend (``fronts/transports.py``; uvloop's loop too), so the scope class anyio hands out is found
once, and the clock is the running loop's (what anyio's asyncio backend reads). The scopes are anyio's
own: shields, nesting and task-group cancellation behave exactly as before.

``Overdue`` is the proxy's safety net for a backend that does not keep its own budget: a deadline far
past the budget that normally never fires. A cancel scope with a deadline costs 84 profiler events per
call (its task bookkeeping in and out, and a loop timer set and cancelled); ``asyncio.timeout`` 54, of
which the timer is most. Here each call is an ``asyncio.timeout(None)`` (no timer: 20 events) that one
loop timer, shared by every call in flight, expires once its deadline passed; the timer is set again
only for a deadline earlier than the one it waits for.
"""

from __future__ import annotations

import asyncio
import math
from contextlib import suppress

import anyio

__all__ = ["Overdue", "cancel_scope", "loop_time"]

_scope_class: type[anyio.CancelScope] | None = None


def cancel_scope(deadline: float = math.inf) -> anyio.CancelScope:
    """``anyio.CancelScope(deadline=deadline)``, of the class anyio made for this process's loop."""
    global _scope_class
    if _scope_class is None:
        _scope_class = type(anyio.CancelScope())
    return _scope_class(deadline=deadline)


def loop_time() -> float:
    """``anyio.current_time()``: the running event loop's clock (cancel-scope deadlines use it)."""
    return asyncio.get_running_loop().time()


class Overdue:
    """Ends the blocks it watches once their deadlines passed, with one loop timer for all of them.

    Usage: ``async with asyncio.timeout(None) as block: overdue.watch(block, deadline)`` … then
    ``overdue.forget(block)`` before leaving it (a ``finally``); a block still in it at ``deadline``
    (the loop's clock) is expired, and leaves with ``TimeoutError`` as ``asyncio.timeout`` does. A
    deadline may fire up to one loop turn late, as a timer's does.
    """

    def __init__(self) -> None:
        self._due: dict[asyncio.Timeout, float] = {}
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = math.inf
        self._timer_loop: asyncio.AbstractEventLoop | None = None

    def __len__(self) -> int:
        """Blocks watched now (tests check that none is left behind)."""
        return len(self._due)

    def watch(self, block: asyncio.Timeout, deadline: float) -> None:
        """Expire ``block`` at ``deadline`` unless it was forgotten before."""
        if self._timer_loop is not asyncio.get_running_loop():
            # a loop of its own (a process may run one after another): what another loop watched is
            # gone with it, and its timer never fires here
            self._due.clear()
            self._timer_at = math.inf
        self._due[block] = deadline
        if deadline < self._timer_at:  # else the timer waits for an earlier one, and looks again then
            self._arm(deadline)

    def forget(self, block: asyncio.Timeout) -> None:
        """``block`` ends (in time or not): it is not watched any more."""
        self._due.pop(block, None)

    def deadline(self, block: asyncio.Timeout) -> float:
        """When ``block`` is expired (``math.inf``: it is not watched)."""
        return self._due.get(block, math.inf)

    def move(self, block: asyncio.Timeout, deadline: float) -> None:
        """Expire ``block`` at ``deadline`` from now on; ``math.inf``: not at all, until it is moved again."""
        if deadline == math.inf:
            self.forget(block)
        else:
            self.watch(block, deadline)

    def _arm(self, when: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        loop = self._timer_loop = asyncio.get_running_loop()
        self._timer, self._timer_at = loop.call_at(when, self._expire), when

    def _expire(self) -> None:
        """The timer: expire every block past its deadline, then wait for the earliest left."""
        self._timer, self._timer_at = None, math.inf
        assert self._timer_loop is not None
        now = self._timer_loop.time()
        for block, deadline in list(self._due.items()):
            if deadline <= now:
                del self._due[block]
                with suppress(RuntimeError):  # left already without ``forget``: nothing to end
                    block.reschedule(now)  # asyncio cancels its task; the block leaves with TimeoutError
        if self._due:
            self._arm(min(self._due.values()))
