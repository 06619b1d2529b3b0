"""A ``find_tools`` that comes while the gateway starts is answered within a bound, not when start-up
is over.

The gateway answers the handshake and ``tools/list`` at once (``server/early.py``) and opens its
registry, loads its embedding model and connects its upstreams in the background. A ``find_tools``
that comes meanwhile waits for that; on a busy machine it can take tens of seconds, and some clients
give one request 5 s (the OpenAI Agents SDK's default) before they fail the tool call. So during
start-up ``find_tools`` gets ``startup_call_wait_s``: answered in that time, it is answered as ever;
otherwise it is dropped (it was still waiting: nothing was searched or published) and answered as
when nothing matched, with a note to call again, which a model acts on. The bound counts from the
request's arrival: one an early front (stdio's or HTTP's) kept while the SDK loaded carries that time.
Not an error: pydantic-ai counts a tool error against its one retry.

Only ``find_tools``: a proxied call may already have reached its upstream when the bound ends, and
dropping it then could run a side effect twice (the model would call again). Once start-up is over
nothing is bounded here.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types as types

from toolweave.server.early import ARRIVED_META
from toolweave.server.meta_tools import FIND_TOOLS, find_tools_result

if TYPE_CHECKING:
    from mcp.server import ServerRequestContext

    from toolweave.server.gateway import Gateway

__all__ = ["STILL_STARTING", "answer_find_tools_while_starting", "starting"]

STILL_STARTING = (
    "the gateway is still starting (opening its tool registry, loading its embedding model, connecting "
    "its upstreams): call find_tools again in a few seconds"
)


def starting(gateway: Gateway) -> bool:
    """Whether a ``find_tools`` may still wait for start-up: the registry or the embedding model is
    loading, or an upstream is on its first connection attempt (neither connected nor failed yet). A
    start that failed is over: every call then answers its error at once."""
    if not gateway.served.ready.is_set():
        return True
    if not gateway.served.is_ready():
        return False
    if not gateway.warmed.is_set():
        return True
    backends = gateway.sources.backends.values()
    return any(not b.available and getattr(b, "last_error", None) is None for b in backends)


def answer_find_tools_while_starting(gateway: Gateway) -> None:
    """Bound the gateway server's ``find_tools`` by ``settings.startup_call_wait_s`` while the gateway
    starts (see the module docstring)."""
    bound_s = gateway.settings.startup_call_wait_s
    entry = gateway.server.get_request_handler("tools/call")
    if bound_s <= 0 or entry is None:
        return
    inner = entry.handler

    async def call_tool(ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams) -> Any:
        if params.name != FIND_TOOLS or not starting(gateway):
            return await inner(ctx, params)
        arrived = (ctx.meta or {}).get(ARRIVED_META)  # kept by the early front while the SDK loaded
        waited = time.monotonic() - arrived if isinstance(arrived, float) else 0.0
        with anyio.move_on_after(min(bound_s, max(0.0, bound_s - waited))):
            return await inner(ctx, params)
        query = (params.arguments or {}).get("query")
        return find_tools_result(str(query or ""), [], list_changed=False, published=(), note=STILL_STARTING)

    gateway.server.add_request_handler("tools/call", types.CallToolRequestParams, call_tool)
