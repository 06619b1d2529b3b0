"""toolweave: an MCP gateway that publishes only the tools a task needs, plus their dependencies.

The core names load lazily, so `import toolweave` costs nothing until one is used (the server-only
path should not pay for LanceDB or the embedder, and the reverse)::

    from toolweave import Registry, Settings, retrieve_tools
    reg = Registry.open()
    for tool in retrieve_tools(reg, "what time is it in Tokyo"):
        print(tool.rank, tool.tool_id, tool.explain())
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from toolweave._lazy import lazy_exports

if TYPE_CHECKING:
    from toolweave.errors import ToolweaveError
    from toolweave.records import DependencyEdge, EdgeKind, ToolRecord
    from toolweave.registry import Embedder, Registry
    from toolweave.retrieval import RankedTool, retrieve_tools
    from toolweave.settings import Settings

__all__ = [
    "DependencyEdge",
    "EdgeKind",
    "Embedder",
    "RankedTool",
    "Registry",
    "Settings",
    "ToolRecord",
    "ToolweaveError",
    "retrieve_tools",
]

_WHERE = {
    "DependencyEdge": "toolweave.records",
    "EdgeKind": "toolweave.records",
    "Embedder": "toolweave.registry",
    "RankedTool": "toolweave.retrieval",
    "Registry": "toolweave.registry",
    "Settings": "toolweave.settings",
    "ToolRecord": "toolweave.records",
    "ToolweaveError": "toolweave.errors",
    "retrieve_tools": "toolweave.retrieval",
}

__getattr__ = lazy_exports(__name__, _WHERE)
