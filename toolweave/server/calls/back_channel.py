"""What a running call may pass back to the client that made it: the upstream's progress reports, and its
requests to the client (sampling, elicitation), forwarded as requests of the gateway's own that name the
client's call (``related_request_id``), so a streamable-HTTP client gets them on that call's stream.

2026-era clients cannot receive server requests (they travel as ``InputRequiredResult`` there, which the
Backend protocol does not carry), so their upstreams get no sampler or elicitor: they are told the client
cannot. A handshake-era client is asked only what it declared it can answer.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any, TypeVar

import mcp_types as types
from mcp.server import ServerRequestContext
from mcp.shared.jsonrpc_dispatcher import progress_token_from_params
from mcp.shared.message import ServerMessageMetadata
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from toolweave.adapters.backend import Elicitor, Progress, Sampler

__all__ = ["NO_BACK_CHANNEL", "BackChannel", "back_channel", "elicitor_for", "progress_for", "sampler_for"]


@dataclass(frozen=True, slots=True)
class BackChannel:
    """What a running call may pass back to the client that made it."""

    sampler: Sampler | None = None
    """Where the upstream's sampling requests go (``sampler_for``)."""
    elicitor: Elicitor | None = None
    """Where the upstream's elicitation requests go (``elicitor_for``)."""
    progress: Progress | None = None
    """Where the upstream's progress reports go (``progress_for``)."""


NO_BACK_CHANNEL = BackChannel()


def back_channel(ctx: ServerRequestContext[Any, Any] | None) -> BackChannel:
    """The back channel of the client's request ``ctx``; none for a call served without the SDK's
    request context (the stdio relay: it serves no client that can be asked, and leaves requests that
    ask for progress to the SDK)."""
    if ctx is None:
        return NO_BACK_CHANNEL
    return BackChannel(sampler_for(ctx), elicitor_for(ctx), progress_for(ctx))


def progress_for(ctx: ServerRequestContext[Any, Any]) -> Progress | None:
    """The client's request asked for progress (a ``progressToken`` in its ``_meta``): the upstream's
    reports go to it, as this request's own ``notifications/progress``. None when it did not, so a call
    nobody watches keeps the upstream's fast path."""
    # the SDK's own reading of the token: report_progress sends nothing without one
    return ctx.session.report_progress if progress_token_from_params(ctx.params) is not None else None


def _declared(ctx: ServerRequestContext[Any, Any]) -> types.ClientCapabilities | None:
    """What the client of ``ctx`` declared it can be asked; None for a 2026-era client (asked nothing)."""
    if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
        return None
    return ctx.session.client_capabilities


def sampler_for(ctx: ServerRequestContext[Any, Any]) -> Sampler | None:
    """Forward upstream sampling to this client, when it is a handshake-era client that declared sampling."""
    caps = _declared(ctx)
    if caps is None or caps.sampling is None:
        return None

    async def sample(params: types.CreateMessageRequestParams) -> types.CreateMessageResult | types.ErrorData:
        # The upstream's request as it is, minus its `_meta` (meant for the upstream's own link) and tool
        # use (the client's sampling.tools capability is not checked here).
        forwarded = params.model_copy(update={"meta": None, "tools": None, "tool_choice": None})
        return await _ask(
            ctx, types.CreateMessageRequest(params=forwarded), types.CreateMessageResult, "sampling"
        )

    return sample


def elicitor_for(ctx: ServerRequestContext[Any, Any]) -> Elicitor | None:
    """Forward upstream elicitation to this client, when it is a handshake-era client that declared it:
    a form when it declared forms (an empty declaration is forms: the 2025-06-18 shape), a URL to open
    only when it declared URLs."""
    caps = _declared(ctx)
    declared = caps.elicitation if caps is not None else None
    if declared is None:
        return None
    forms = declared.form is not None or declared.url is None
    urls = declared.url is not None

    async def elicit(params: types.ElicitRequestParams) -> types.ElicitResult | types.ErrorData:
        url = isinstance(params, types.ElicitRequestURLParams)
        if not (urls if url else forms):
            mode = "URL" if url else "form"
            return types.ErrorData(
                code=types.INVALID_PARAMS, message=f"{mode} elicitation not supported by the client"
            )
        forwarded = params.model_copy(update={"meta": None})
        if isinstance(forwarded, types.ElicitRequestURLParams) and forwarded.elicitation_id is None:
            # a 2026-era upstream's URL carries no id, which a handshake-era client requires
            forwarded.elicitation_id = uuid.uuid4().hex
        return await _ask(ctx, types.ElicitRequest(params=forwarded), types.ElicitResult, "elicitation")

    return elicit


_Result = TypeVar("_Result", types.CreateMessageResult, types.ElicitResult)


async def _ask(
    ctx: ServerRequestContext[Any, Any],
    request: types.CreateMessageRequest | types.ElicitRequest,
    result_type: type[_Result],
    what: str,
) -> _Result | types.ErrorData:
    """Send ``request`` to the client of ``ctx`` as part of its call; its failure is the upstream's
    error answer, never the gateway's."""
    try:
        return await ctx.session.send_request(
            request, result_type, metadata=ServerMessageMetadata(related_request_id=ctx.request_id)
        )
    except Exception as exc:  # the client refused or failed: tell the upstream, keep going
        return types.ErrorData(code=types.INTERNAL_ERROR, message=f"client {what} failed: {exc}")
