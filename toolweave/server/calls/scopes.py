"""Cancel scopes and the clock on a proxied call's path, without asking which event loop runs.

``anyio.CancelScope()`` and ``anyio.current_time()`` ask sniffio which async library runs on every call
(a context variable, the running task, the backend look-up): 19 and 17 profiler events each, several
times per proxied call (bench/RESULTS.md, "The loop's own cost"). The gateway runs on anyio's asyncio
backend (``fronts/transports.py``; uvloop's loop too), so the scope class anyio hands out is found
once, and the clock is the running loop's (what anyio's asyncio backend reads). The scopes are anyio's
own: shields, nesting and task-group cancellation behave exactly as before.
"""

from __future__ import annotations

import asyncio
import math

import anyio

__all__ = ["cancel_scope", "loop_time"]

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
