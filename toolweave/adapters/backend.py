"""What the server needs from any backend: an upstream MCP server or an HTTP API described by OpenAPI.

A backend discovers its tools, reports them (again) whenever they change, tells whether it can be
called right now and why its last attempt to connect failed, and proxies calls within a budget it
states. The server owns the backends' lifetimes; the backends never import the server. ``Backend``
declares everything the server reads of a backend.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol, TypedDict, TypeVar, Unpack, cast, runtime_checkable

import anyio
import mcp_types as types

from toolweave.records import DependencyEdge, ToolRecord

__all__ = [
    "Backend",
    "CallOptions",
    "Elicitor",
    "PausedBudget",
    "Progress",
    "ProgressInOrder",
    "Sampler",
    "StatusCallback",
    "ToolsCallback",
    "call_budget",
]

ToolsCallback = Callable[[str, Sequence[ToolRecord], Sequence[DependencyEdge]], Awaitable[None]]
"""``await on_tools(source, tools, edges)``: the backend's complete, current tool list (all pages)."""

StatusCallback = Callable[[str, bool], Awaitable[None]]
"""``await on_status(source, available)``: a backend lost (False) or (re)gained (True) its upstream."""

Sampler = Callable[[types.CreateMessageRequestParams], Awaitable[types.CreateMessageResult | types.ErrorData]]
"""Asks the downstream client's LLM (sampling/createMessage) on behalf of an upstream, during a call."""

Elicitor = Callable[[types.ElicitRequestParams], Awaitable[types.ElicitResult | types.ErrorData]]
"""Asks the downstream client's user (elicitation/create: a form, or a URL to open) on behalf of an
upstream, during a call."""


class Progress(Protocol):
    """Tells the downstream client how far a call has come: what the upstream reported with
    ``notifications/progress`` (the SDK's ``ProgressFnT`` shape)."""

    async def __call__(self, progress: float, total: float | None, message: str | None) -> None: ...


class ProgressInOrder:
    """``progress`` that a call's answer does not overtake. The SDK client runs each progress callback
    as a task of its own, so the answer could reach the client before the upstream's last report (which
    the client then drops, its request being done); the backend awaits ``settled`` before it answers."""

    def __init__(self, progress: Progress) -> None:
        self._progress = progress
        self._running = 0
        self._idle = asyncio.Event()
        self._idle.set()

    async def __call__(self, progress: float, total: float | None, message: str | None) -> None:
        self._running += 1
        self._idle.clear()
        try:
            await self._progress(progress, total, message)
        finally:
            self._running -= 1
            if not self._running:
                self._idle.set()

    async def settled(self, within_s: float = 1.0) -> None:
        """Until every report already being passed on has gone (at most ``within_s``)."""
        with anyio.move_on_after(within_s):
            await self._idle.wait()


CLIENT_ANSWER_LIMIT_S = 600.0
"""The longest a call waits for its client to answer one of the upstream's requests (a person filling in
an elicitation form); then the upstream gets an error, and the call's budget runs again."""

_Asker = TypeVar("_Asker", Sampler, Elicitor)


class PausedBudget:
    """A call's deadline that stops while the call waits for its client's answer to the upstream's
    sampling or elicitation request: that time is the client's (its LLM, or a person filling in a form),
    not the upstream's, so it does not count against the call's budget. ``get`` and ``put`` read and move
    the deadline (the event loop's clock; ``put(math.inf)``: none while an answer is awaited)."""

    def __init__(self, get: Callable[[], float], put: Callable[[float], None]) -> None:
        self._get, self._put = get, put
        self._waiting = 0
        self._left = 0.0

    def pausing(self, asker: _Asker | None) -> _Asker | None:
        """``asker`` with this budget paused while it waits (None stays None)."""
        if asker is None:
            return None
        answer = cast(Callable[[Any], Awaitable[Any]], asker)

        async def paused(params: Any) -> Any:
            loop = asyncio.get_running_loop()
            if not self._waiting:
                self._left = max(self._get() - loop.time(), 0.0)
                self._put(math.inf)
            self._waiting += 1
            try:
                with anyio.move_on_after(CLIENT_ANSWER_LIMIT_S):
                    return await answer(params)
                return types.ErrorData(
                    code=types.INTERNAL_ERROR,
                    message=f"the client did not answer within {CLIENT_ANSWER_LIMIT_S:g} s",
                )
            finally:
                self._waiting -= 1
                if not self._waiting:
                    self._put(loop.time() + self._left)

        return cast(_Asker, paused)


def call_budget(own_s: float | None, gateway_s: float) -> float:
    """How long one upstream call may take in all, retries included: the source's own ``timeout_s``
    where its manifest entry sets one, else the gateway's ``Settings.call_timeout_s``.

    The one place this is decided, for every backend kind (httpx's shape: a client default and a
    per-request value that wins over it). The proxy resolves it per call, passes it to ``call`` and
    waits that long plus a margin; a backend called directly resolves its own the same way.
    """
    return own_s if own_s is not None else gateway_s


class CallOptions(TypedDict, total=False):
    """The keyword options of ``Backend.call``, typed once for the protocol and its implementations."""

    timeout_s: float | None
    """The whole call's budget in seconds, retries included (the proxy passes what ``call_budget``
    resolved); None or absent: ``call_budget`` of the backend's own and the gateway default it was built
    with."""
    sampler: Sampler | None
    """Answers the upstream's sampling requests during this call (None: the upstream cannot sample)."""
    elicitor: Elicitor | None
    """Answers the upstream's elicitation requests during this call (None: the client cannot be asked)."""
    progress: Progress | None
    """Passes the upstream's progress reports on to the client that asked for them (None: nobody asked)."""


@runtime_checkable
class Backend(Protocol):
    """One upstream. ``run`` is its owner task: it connects, discovers, stays in sync and reconnects."""

    name: str

    @property
    def available(self) -> bool:
        """True while calls can be proxied (connected and initialised)."""
        ...

    @property
    def last_error(self) -> str | None:
        """Why the latest attempt to connect (or load) failed; None before the first attempt ends and
        once one succeeded. The server stops waiting for a first tool list when it is set."""
        ...

    @property
    def call_timeout_s(self) -> float | None:
        """The source's own call budget (its manifest entry's ``timeout_s``), None where it sets none:
        ``call_budget`` then gives the gateway's ``call_timeout_s``."""
        ...

    async def run(self, on_tools: ToolsCallback) -> None:
        """Connect, report tools through ``on_tools``, keep them in sync, reconnect with backoff; never
        returns until cancelled, and never raises because the upstream misbehaved."""
        ...

    async def call(
        self, tool: ToolRecord, arguments: dict[str, Any], **options: Unpack[CallOptions]
    ) -> types.CallToolResult:
        """Proxy one call. Failures (timeouts, crashes, upstream errors) come back as ``is_error`` results."""
        ...
