"""``_meta`` keys of the MCP wire that more than one part of the gateway reads or writes.

Plain strings with no imports: the handshake answers before the MCP SDK is imported, and the adapters,
the proxy and the stdio relay all speak of the same keys.
"""

from __future__ import annotations

__all__ = ["SERVER_INFO_META_KEY"]

SERVER_INFO_META_KEY = "io.modelcontextprotocol/serverInfo"
"""The key under which 2026-era servers stamp every result with their identity: an upstream's stamp is
dropped (the gateway is the server its client sees), the gateway's own is added."""
