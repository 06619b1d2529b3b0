"""The one exception tree of toolweave.

Every error toolweave raises on purpose is a ``ToolweaveError``; foreign exceptions (httpx, lancedb,
the MCP SDK, YAML/JSON parsers) are translated once, at the edge that talks to them, and re-raised
``from`` the original so the cause stays visible::

    ToolweaveError
    ├── ConfigError                 bad settings or manifest (file, line, field)
    ├── CatalogError                a catalog/spec file we were asked to read is malformed
    ├── AdapterError                talking to a backend failed
    │   ├── UpstreamUnavailable     cannot reach / lost the upstream
    │   ├── UpstreamTimeout         the upstream did not answer in time
    │   ├── UpstreamProtocolError   the upstream answered something we cannot use
    │   └── OpenAPISpecError        an OpenAPI document cannot be turned into tools
    ├── RegistryError               the tool registry cannot do what was asked
    │   ├── NotARegistryError       the directory holds something that is not a toolweave registry
    │   ├── ModelMismatchError      the registry was built with another embedding model
    │   ├── RegistryBusyError       another process is writing the registry (writer lock, commit race)
    │   ├── EmbeddingError          the embedding model cannot be loaded or run
    │   ├── ToolNotFound            no tool with that id
    │   └── GraphError              the dependency graph is inconsistent (unknown tool, bad edge)
    ├── RetrievalError              bad retrieval parameters
    ├── ToolArgumentsError          tool-call arguments do not match the input schema
    └── ServerError                 the gateway itself cannot serve
"""

from __future__ import annotations

__all__ = [
    "AdapterError",
    "CatalogError",
    "ConfigError",
    "EmbeddingError",
    "GraphError",
    "ModelMismatchError",
    "NotARegistryError",
    "OpenAPISpecError",
    "RegistryBusyError",
    "RegistryError",
    "RetrievalError",
    "ServerError",
    "ToolArgumentsError",
    "ToolNotFound",
    "ToolweaveError",
    "UpstreamProtocolError",
    "UpstreamTimeout",
    "UpstreamUnavailable",
]


class ToolweaveError(Exception):
    """Root of every error toolweave raises deliberately."""


class ConfigError(ToolweaveError):
    """Settings or a manifest are invalid. The message names the file, line and field."""


class CatalogError(ToolweaveError):
    """A catalog or spec file is malformed. The message names the file and, when known, the tool."""


class AdapterError(ToolweaveError):
    """A backend (upstream MCP server or HTTP API) could not be used."""


class UpstreamUnavailable(AdapterError):
    """The upstream cannot be reached, or the connection to it was lost."""


class UpstreamTimeout(AdapterError):
    """The upstream did not answer within the configured timeout."""


class UpstreamProtocolError(AdapterError):
    """The upstream answered, but with something we cannot use."""


class OpenAPISpecError(AdapterError):
    """An OpenAPI document (or part of it) cannot be turned into tools. Names the spec and JSON pointer."""


class RegistryError(ToolweaveError):
    """The tool registry cannot do what was asked."""


class NotARegistryError(RegistryError):
    """The directory exists and holds files, but not a toolweave registry."""


class ModelMismatchError(RegistryError):
    """The registry's vectors were made by another embedding model than the one configured."""


class RegistryBusyError(RegistryError):
    """Another process holds the registry's writer lock, or committed first (see registry/lock.py)."""


class EmbeddingError(RegistryError):
    """The embedding model cannot be loaded or run."""


class ToolNotFound(RegistryError):
    """No tool with that id is in the registry."""


class GraphError(RegistryError):
    """The dependency graph is inconsistent: an edge to an unknown tool, an unknown edge kind, ..."""


class RetrievalError(ToolweaveError):
    """Retrieval was asked for with invalid parameters."""


class ToolArgumentsError(ToolweaveError):
    """Arguments of a tool call do not match the tool's input schema."""


class ServerError(ToolweaveError):
    """The gateway cannot serve (bad transport, port in use, ...)."""
