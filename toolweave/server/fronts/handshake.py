"""What the gateway answers before it knows anything, in both protocol eras: ``initialize`` and
``server/discover``, the meta-tools' first list, ``ping`` and the ``subscriptions/listen`` acknowledgement.

Standard library only, on purpose: the early front (``server/fronts/early.py``) answers the stdio handshake
from these values before the MCP SDK is imported, and the gateway's SDK server is built from the same values,
so the two answers cannot drift apart. ``tests/server/test_early.py`` checks each early answer against
the SDK's own reply for every protocol version the SDK negotiates, in both eras.

The values are wire JSON (camelCase keys): the SDK side turns them into its models
(``meta_tools.meta_tools``), the early front writes them as they are.
"""

from __future__ import annotations

from typing import Any

from toolweave.wire_meta import SERVER_INFO_META_KEY

__all__ = [
    "ALWAYS_LOAD",
    "CALL_TOOL",
    "CAPABILITIES",
    "FIND_TOOLS",
    "HANDSHAKE_PROTOCOL_VERSIONS",
    "INSTRUCTIONS",
    "LISTEN_ACKNOWLEDGED",
    "MAX_K",
    "META_INPUT_SCHEMAS",
    "MODERN_PROTOCOL_VERSIONS",
    "SERVER_NAME",
    "SUBSCRIPTION_ID_META",
    "discover_result",
    "envelope_version",
    "initialize_params_ok",
    "initialize_result",
    "is_request_id",
    "listed_ready_tool",
    "listen_acknowledgement",
    "meta_tool_definitions",
    "modern_ping_error",
    "modern_result",
    "modern_tools_list_result",
    "provisional_always_load",
    "server_version",
    "tools_list_result",
    "without_cursor",
]

SERVER_NAME = "toolweave"
FIND_TOOLS = "find_tools"
CALL_TOOL = "call_tool"
MAX_K = 50

INSTRUCTIONS = (
    "This server is a gateway to many tools. It starts with two: find_tools(query) searches every "
    "connected tool and returns the ones a task needs (with their input schemas and dependencies), and "
    "call_tool(name, arguments) runs any of them. Found tools are also added to your tool list."
)

HANDSHAKE_PROTOCOL_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
"""The ``initialize``-era versions the SDK negotiates (``mcp_types.version``), oldest to newest: a
requested one is echoed, anything else gets the newest (a test keeps this equal to the SDK's)."""

MODERN_PROTOCOL_VERSIONS = ("2026-07-28",)
"""The per-request-envelope versions (``server/discover`` era) the SDK serves (a test keeps this equal)."""

PROTOCOL_VERSION_META = "io.modelcontextprotocol/protocolVersion"
CLIENT_CAPABILITIES_META = "io.modelcontextprotocol/clientCapabilities"
CLIENT_INFO_META = "io.modelcontextprotocol/clientInfo"
LOG_LEVEL_META = "io.modelcontextprotocol/logLevel"
SUBSCRIPTION_ID_META = "io.modelcontextprotocol/subscriptionId"
LISTEN_ACKNOWLEDGED = "notifications/subscriptions/acknowledged"
_LOG_LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")
_FALSE_WORDS = ("0", "false", "f", "no", "n", "off")

CAPABILITIES: dict[str, Any] = {"tools": {"listChanged": True}}
"""What the gateway's server advertises: tools, and that their list changes (``Gateway`` makes the SDK
advertise ``listChanged`` on every transport)."""

ALWAYS_LOAD = {"anthropic/alwaysLoad": True}
"""Tool ``_meta`` that keeps Claude Code from deferring a tool behind its own tool search."""

_FIND_TOOLS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "query": {
            "type": "string",
            "minLength": 1,
            "description": "What you want to do, in plain words (e.g. 'what time is it in Tokyo').",
        },
        "k": {
            "type": "integer",
            "minimum": 1,
            "maximum": MAX_K,
            "description": "How many tools to return at most (default: the gateway's setting).",
        },
        "detail": {
            "type": "boolean",
            "description": "Also give the input schemas of the tools found but not published (default: no).",
        },
    },
    "required": ["query"],
    "additionalProperties": False,
}

_CALL_TOOL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "minLength": 1, "description": "Tool name as returned by find_tools."},
        "arguments": {
            "type": "object",
            "description": "Arguments for that tool, matching the input_schema find_tools returned.",
        },
    },
    "required": ["name"],
    "additionalProperties": False,
}

_META_TOOLS: tuple[dict[str, Any], ...] = (
    {
        "name": FIND_TOOLS,
        "title": "Find tools",
        "description": (
            "Search all tools available through this gateway for the ones a task needs, plus the tools "
            "they depend on. The chosen tools are added to this session's tool list and returned with "
            "their input schemas; other candidates are named in one line each under also_found "
            "(detail=true gives their schemas too). Call the chosen tools directly, or through "
            "call_tool if your client does not refresh its tool list."
        ),
        "inputSchema": _FIND_TOOLS_SCHEMA,
        "annotations": {"readOnlyHint": True, "openWorldHint": False},
    },
    {
        "name": CALL_TOOL,
        "title": "Call a tool",
        "description": (
            "Run any tool found with find_tools by its name, with arguments matching its input schema. "
            "Works for tools that are not in your current tool list."
        ),
        "inputSchema": _CALL_TOOL_SCHEMA,
    },
)


META_INPUT_SCHEMAS: dict[str, dict[str, Any]] = {FIND_TOOLS: _FIND_TOOLS_SCHEMA, CALL_TOOL: _CALL_TOOL_SCHEMA}
"""The meta-tools' input schemas by name (looked up on every call: no Tool objects built for that)."""


def meta_tool_definitions(meta: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """``find_tools`` and ``call_tool`` as wire JSON, with ``meta`` as their ``_meta`` (shared schema
    dicts: read them, never change them)."""
    return [{**tool, "_meta": meta} if meta is not None else dict(tool) for tool in _META_TOOLS]


def tools_list_result(always_load: bool) -> dict[str, Any]:
    """The ``tools/list`` result of a session before the registry is open: the meta-tools only."""
    return {"tools": meta_tool_definitions(dict(ALWAYS_LOAD) if always_load else None)}


def listed_ready_tool(
    entry: dict[str, Any], always_load: bool, listed: dict[str, Any] | None = None
) -> dict[str, Any]:
    """A ready table's ``find_tools`` entry, with what ``tools/list`` shows beyond it (``listed``: its
    ``ReadyTool.listed``), as ``tools/list`` shows the tool while the registry opens (as the gateway shows
    it from the same table: ``Gateway._ready_tools``)."""
    tool = {
        "name": entry["name"],
        "description": entry.get("description"),
        "inputSchema": entry.get("input_schema") or {"type": "object"},
        **(listed or {}),
    }
    return {**tool, "_meta": dict(ALWAYS_LOAD)} if always_load else tool


def provisional_always_load() -> bool:
    """``publish.always_load`` as far as it is known before the settings are loaded: the default, or
    what ``TOOLWEAVE_PUBLISH__ALWAYS_LOAD`` says. A manifest that says otherwise is applied when the
    settings are (the client then hears ``list_changed``: ``server/fronts/transports.py``)."""
    import os

    value = os.environ.get("TOOLWEAVE_PUBLISH__ALWAYS_LOAD")
    return value is None or value.strip().lower() not in _FALSE_WORDS


def server_version() -> str:
    """toolweave's installed version (``0.0.0`` when run from a source tree that is not installed)."""
    from importlib.metadata import PackageNotFoundError, version  # ~0.1 s: only when asked

    try:
        return version("toolweave")
    except PackageNotFoundError:
        return "0.0.0"


def initialize_result(requested: object, version: str) -> dict[str, Any]:
    """The ``initialize`` result for a client that asked for protocol ``requested``."""
    negotiated = requested if requested in HANDSHAKE_PROTOCOL_VERSIONS else HANDSHAKE_PROTOCOL_VERSIONS[-1]
    return {
        "capabilities": CAPABILITIES,
        "instructions": INSTRUCTIONS,
        "protocolVersion": negotiated,
        "serverInfo": {"name": SERVER_NAME, "version": version},
    }


def is_request_id(value: object) -> bool:
    """A JSON-RPC request id the SDK accepts (a string or an integer, not a boolean)."""
    return isinstance(value, int | str) and not isinstance(value, bool)


def initialize_params_ok(params: object) -> bool:
    """``initialize`` params of the shape the SDK accepts (anything else gets its error reply, so the SDK
    must answer)."""
    if not isinstance(params, dict):
        return False
    client = params.get("clientInfo")
    return (
        isinstance(params.get("protocolVersion"), str)
        and isinstance(params.get("capabilities"), dict)
        and isinstance(client, dict)
        and isinstance(client.get("name"), str)
        and isinstance(client.get("version"), str)
    )


def without_cursor(params: object) -> bool:
    """A list request for the first page (a cursor is for the SDK: only it pages)."""
    return params is None or (isinstance(params, dict) and params.get("cursor") is None)


# -- the 2026-07-28 era: every request carries its envelope in ``_meta`` ---------------------------------
def envelope_version(params: object) -> str | None:
    """The protocol version of a well-formed 2026-era request envelope (``params._meta``), or None when
    there is none or it is one the SDK would refuse or read differently (the SDK then answers itself)."""
    meta = params.get("_meta") if isinstance(params, dict) else None
    if not isinstance(meta, dict):
        return None
    version = meta.get(PROTOCOL_VERSION_META)
    capabilities = meta.get(CLIENT_CAPABILITIES_META)
    if version not in MODERN_PROTOCOL_VERSIONS or not isinstance(capabilities, dict):
        return None
    if not all(isinstance(value, dict) for value in capabilities.values()):
        return None
    info = meta.get(CLIENT_INFO_META)
    if info is not None and not (
        isinstance(info, dict) and isinstance(info.get("name"), str) and isinstance(info.get("version"), str)
    ):
        return None
    level = meta.get(LOG_LEVEL_META)
    if level is not None and level not in _LOG_LEVELS:
        return None
    assert isinstance(version, str)
    return version


def _modern(result: dict[str, Any], version: str) -> dict[str, Any]:
    """A 2026-era result as the SDK writes it: complete, stamped with the server's identity."""
    stamp = {SERVER_INFO_META_KEY: {"name": SERVER_NAME, "version": version}}
    return {**result, "resultType": "complete", "_meta": stamp}


def modern_result(result: dict[str, Any], version: str) -> dict[str, Any]:
    """``result`` as the 2026-07-28 era's surface carries it (``resultType``, the server stamp)."""
    return _modern(result, version)


def discover_result(version: str) -> dict[str, Any]:
    """The ``server/discover`` result (``version``: toolweave's)."""
    return _modern(
        {
            "capabilities": CAPABILITIES,
            "instructions": INSTRUCTIONS,
            "supportedVersions": list(MODERN_PROTOCOL_VERSIONS),
            "cacheScope": "private",
            "ttlMs": 0,
        },
        version,
    )


def modern_tools_list_result(always_load: bool, version: str) -> dict[str, Any]:
    """``tools/list`` of a 2026-era session before the registry is open (the list is per session: its
    results are never to be shared or reused, hence ``private`` and ``ttlMs`` 0, as the gateway says)."""
    return _modern({**tools_list_result(always_load), "cacheScope": "private", "ttlMs": 0}, version)


def modern_ping_error() -> dict[str, Any]:
    """What a 2026-era ``ping`` gets: the method left the protocol with the handshake."""
    return {"code": -32601, "message": "Method not found", "data": "ping"}


_LISTEN_FLAGS = frozenset({"toolsListChanged", "promptsListChanged", "resourcesListChanged"})


def listen_acknowledgement(subscription_id: object, params: object) -> dict[str, Any] | None:
    """The ``notifications/subscriptions/acknowledged`` params that open a ``subscriptions/listen``
    stream: every requested kind is honoured. None for a filter this does not read as the SDK does
    (resource subscriptions, values that are not booleans): the SDK acknowledges those itself."""
    notifications = params.get("notifications") if isinstance(params, dict) else None
    if not isinstance(notifications, dict):
        return None
    if not notifications.keys() <= _LISTEN_FLAGS:
        return None
    if not all(isinstance(wanted, bool) for wanted in notifications.values()):
        return None
    honored = {name: True for name, wanted in notifications.items() if wanted}
    return {"_meta": {SUBSCRIPTION_ID_META: subscription_id}, "notifications": honored}
