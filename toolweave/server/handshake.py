"""What the gateway answers before it knows anything: ``initialize`` and the meta-tools' first list.

Standard library only, on purpose: the early front (``server/early.py``) answers the stdio handshake from
these values before the MCP SDK is imported, and the gateway's SDK server is built from the same values,
so the two answers cannot drift apart. ``tests/server/test_early.py`` checks each early answer against
the SDK's own reply for every handshake protocol version the SDK negotiates.

The values are wire JSON (camelCase keys): the SDK side turns them into its models
(``meta_tools.meta_tools``), the early front writes them as they are.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "ALWAYS_LOAD",
    "CALL_TOOL",
    "CAPABILITIES",
    "FIND_TOOLS",
    "HANDSHAKE_PROTOCOL_VERSIONS",
    "INSTRUCTIONS",
    "MAX_K",
    "META_INPUT_SCHEMAS",
    "SERVER_NAME",
    "initialize_result",
    "meta_tool_definitions",
    "server_version",
    "tools_list_result",
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
            "they depend on. Returns each tool's name, description, full input schema and why it was "
            "chosen; the chosen tools are also added to this session's tool list. Call them directly, "
            "or through call_tool if your client does not refresh its tool list."
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
