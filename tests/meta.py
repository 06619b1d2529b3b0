"""Request ``_meta`` as the SDK's client types it.

The SDK types ``_meta`` as a TypedDict of the keys MCP defines (``progressToken``); an extension's keys
(toolweave's session name, its arrival stamp) travel in the same object as extra items, which the
TypedDict cannot list. These helpers are the one place a test says so.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import cast

import mcp_types as types

from toolweave.server.sessions.session_book import SESSION_META_KEY


def request_meta(fields: Mapping[str, object]) -> types.RequestParamsMeta:
    """``fields`` as a request's ``_meta``."""
    return cast(types.RequestParamsMeta, dict(fields))


def session_meta(session: str) -> types.RequestParamsMeta:
    """A request's ``_meta`` that names the toolweave session ``session``."""
    return request_meta({SESSION_META_KEY: session})
