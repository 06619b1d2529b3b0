"""An upstream's requests to its client during a call: sampling and elicitation, answered by the client
of the call in progress.

The gateway holds one session per upstream for all its clients, so such a request must find the call it
belongs to. In the 2026 era the SDK's ``Client.call_tool`` runs the callback in the call's own task
(``InputRequiredResult``): the call's context says whose it is. In the handshake era the request arrives
on the session's receive task, which knows no call: it goes to the most recent call in flight that can
answer it. An upstream that asks with no such call in flight gets a JSON-RPC error naming what the
client cannot do, and the tool it runs decides what that means.
"""

from __future__ import annotations

import contextvars
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Literal

import mcp_types as types

from toolweave.adapters.backend import CallOptions

__all__ = ["ClientAsks", "asks_client"]

log = logging.getLogger(__name__)

_call: contextvars.ContextVar[CallOptions | None] = contextvars.ContextVar("toolweave_call", default=None)


def asks_client(options: CallOptions) -> bool:
    """Whether a call with ``options`` can answer an upstream's sampling or elicitation request."""
    return options.get("sampler") is not None or options.get("elicitor") is not None


class ClientAsks:
    """The calls of one upstream that can answer its requests; its ``sample`` and ``elicit`` are the SDK
    client's callbacks."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream
        self._calls: list[CallOptions] = []
        """Calls in flight that can answer, oldest first (compared by identity: options are dicts)."""

    @contextmanager
    def during(self, options: CallOptions) -> Iterator[None]:
        """Route the upstream's requests to this call while it runs."""
        token = _call.set(options)
        listed = asks_client(options)
        if listed:
            self._calls.append(options)
        try:
            yield
        finally:
            _call.reset(token)
            if listed:
                del self._calls[next(i for i, c in enumerate(self._calls) if c is options)]

    def _answerer(self, kind: Literal["sampler", "elicitor"]) -> Any:
        own = _call.get()
        if own is not None:  # the 2026 era: the call's own, or none (another call's client must not answer)
            return own.get(kind)
        return next((c[kind] for c in reversed(self._calls) if c.get(kind) is not None), None)

    async def sample(
        self, context: Any, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult | types.CreateMessageResultWithTools | types.ErrorData:
        answer: types.CreateMessageResult | types.ErrorData = await self._forward(
            "sampler", "sampling", params
        )
        return answer

    async def elicit(
        self, context: Any, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        answer: types.ElicitResult | types.ErrorData = await self._forward("elicitor", "elicitation", params)
        return answer

    async def _forward(self, kind: Literal["sampler", "elicitor"], what: str, params: Any) -> Any:
        """``params`` to the call's answerer of ``kind``; an error the upstream can handle without one."""
        answerer = self._answerer(kind)
        if answerer is None:
            return types.ErrorData(code=types.INVALID_REQUEST, message=f"{what} not supported by the client")
        try:
            return await answerer(params)
        except Exception as exc:  # a client's failure must not cost the upstream
            log.warning("upstream %r: %s through the client failed: %s", self.upstream, what, exc)
            return types.ErrorData(code=types.INTERNAL_ERROR, message=f"{what} failed: {exc}")
