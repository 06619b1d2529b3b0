"""Shared records: tools, dependency edges and their kinds.

These are the domain model every layer speaks. Adapters produce them, the registry stores them,
retrieval ranks them and the server turns them into MCP wire objects. They never import I/O code.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from toolweave.errors import CatalogError

__all__ = [
    "CONTEXT_WEIGHT",
    "MAX_TOOL_ID_LENGTH",
    "DependencyEdge",
    "EdgeKind",
    "EdgeOrigin",
    "Hit",
    "QueryVariant",
    "SearchResults",
    "SearchScope",
    "ToolKind",
    "ToolRecord",
    "make_tool_id",
    "sanitize_name",
]

MAX_TOOL_ID_LENGTH = 64
"""Anthropic's API rejects tool names over 64 characters, so ids (= published names) stay within it."""

# Bump when the text we embed for a tool changes shape: every tool is then re-embedded once.
DOCUMENT_VERSION = 2  # 2: examples left out of the document, kept as usage vectors (Tool2Vec)

ToolKind = Literal["core", "regular"]

QueryVariant = tuple[str, ...]
"""A query text, optionally followed by context texts (earlier requests of the conversation): what
retrieval asks the registry to search for."""

CONTEXT_WEIGHT = 0.5
"""Weight of the latest context text's vector in a variant's composed vector (the query itself weighs 1);
each older one weighs this factor less again (0.5, 0.25, 0.125, ...). The registry composes the vector,
retrieval decides what a variant holds: both read this one constant."""


@dataclass(frozen=True, slots=True)
class Hit:
    """A first-pass candidate: a tool id and its score (higher is better); the registry's searches
    return these and retrieval ranks them."""

    tool_id: str
    score: float


@dataclass(frozen=True, slots=True)
class SearchScope:
    """What one registry search covers: the sources left out, and which sides run (vector, full text)."""

    exclude_sources: frozenset[str] = frozenset()
    vector: bool = True
    text: bool = True


SearchResults = list[tuple[list[Hit], list[Hit]]]
"""``(vector hits, text hits)`` for each query variant of a search (empty for a side not asked for)."""


EdgeOrigin = Literal["declared", "manifest", "inferred"]


class EdgeKind(StrEnum):
    """The four dependency kinds of Graph RAG-Tool Fusion (tool/parameter x direct/indirect)."""

    TOOL_DIRECTLY_DEPENDS_ON = "TOOL_DIRECTLY_DEPENDS_ON"
    TOOL_INDIRECTLY_DEPENDS_ON = "TOOL_INDIRECTLY_DEPENDS_ON"
    PARAMETER_DIRECTLY_DEPENDS_ON = "PARAMETER_DIRECTLY_DEPENDS_ON"
    PARAMETER_INDIRECTLY_DEPENDS_ON = "PARAMETER_INDIRECTLY_DEPENDS_ON"

    @classmethod
    def parse(cls, raw: str) -> EdgeKind:
        """Read an edge kind as spelled in the wild.

        ToolLinkOS spells some kinds with a space ("TOOL INDIRECTLY_DEPENDS_ON") and two edges
        as "PARAMETER_DEPENDS_ON"; a parameter dependency without a qualifier is a direct one.
        Raises ``ValueError`` naming the accepted kinds for anything else.
        """
        key = re.sub(r"[\s\-]+", "_", raw.strip()).upper()
        if key in cls.__members__:
            return cls[key]
        aliases = {
            "PARAMETER_DEPENDS_ON": cls.PARAMETER_DIRECTLY_DEPENDS_ON,
            "TOOL_DEPENDS_ON": cls.TOOL_DIRECTLY_DEPENDS_ON,
        }
        if key in aliases:
            return aliases[key]
        raise ValueError(f"unknown edge kind {raw!r}; expected one of {', '.join(cls.__members__)}")


class ToolRecord(BaseModel):
    """One tool, whatever its backend. ``id`` is the name the gateway publishes."""

    model_config = ConfigDict(frozen=True)

    id: str = Field(description="`<source>__<name>`, at most 64 characters, stable and unique.")
    source: str = Field(description="Name of the upstream server, spec or catalog the tool comes from.")
    name: str = Field(description="The tool's own name at its backend.")
    title: str = ""
    description: str = ""
    input_schema: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})
    output_schema: dict[str, Any] | None = None
    kind: ToolKind = "regular"
    examples: tuple[str, ...] = Field(default=(), description="Usage queries, for usage-driven embeddings.")
    tags: tuple[str, ...] = ()
    backend: dict[str, Any] = Field(
        default_factory=dict,
        description="What the adapter needs to call the tool (HTTP method, path, ...). Never secrets.",
    )

    @property
    def content_hash(self) -> str:
        """Hash of everything that shapes the tool's embedding and schema; unchanged hash = no re-embed."""
        payload = self.model_dump(mode="json", exclude={"id"})
        payload["_doc_version"] = DOCUMENT_VERSION
        blob = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return hashlib.sha256(blob.encode()).hexdigest()[:32]

    @property
    def annotations(self) -> dict[str, Any]:
        """MCP tool annotations (``read_only_hint``, ``destructive_hint``, ``idempotent_hint``,
        ``open_world_hint``, ``title``) as the backend declared them; OpenAPI tools get them from the HTTP
        method. They are hints from the backend: good for ranking, never a security boundary."""
        ann = self.backend.get("annotations")
        return ann if isinstance(ann, dict) else {}

    @property
    def read_only(self) -> bool:
        """The backend says the tool changes nothing (``readOnlyHint: true``)."""
        return self.annotations.get("read_only_hint") is True

    @property
    def destructive(self) -> bool:
        """The backend says the tool may destroy data (``destructiveHint: true``, stated explicitly)."""
        return self.annotations.get("destructive_hint") is True


class DependencyEdge(BaseModel):
    """``tool`` depends on ``depends_on``: retrieval that picks ``tool`` should bring ``depends_on`` too."""

    model_config = ConfigDict(frozen=True)

    tool: str = Field(description="Id of the dependent tool.")
    depends_on: str = Field(description="Id of the tool it needs.")
    kind: EdgeKind
    parameter_name: str | None = None
    reason: str = ""
    origin: EdgeOrigin = "declared"
    confidence: float = 1.0
    evidence: str = ""

    @property
    def key(self) -> tuple[str, str, EdgeKind, str | None]:
        return (self.tool, self.depends_on, self.kind, self.parameter_name)


_UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")


def sanitize_name(name: str) -> str:
    """Map a name to the characters every MCP client accepts in a tool name (``[A-Za-z0-9_-]``)."""
    cleaned = _UNSAFE.sub("_", name.strip()).strip("_")
    return cleaned or "tool"


def make_tool_id(source: str, name: str, taken: set[str] | None = None) -> str:
    """``<source>__<name>``, sanitised, at most 64 characters, deterministic.

    Too long, or colliding with an id in ``taken`` (two raw names that sanitise alike), the id keeps
    a readable prefix and ends in a hash of the *raw* source and name, so the same tool always gets
    the same id. The registry keeps the mapping back to ``(source, name)``.
    """
    base = f"{sanitize_name(source)}__{sanitize_name(name)}"
    if len(base) <= MAX_TOOL_ID_LENGTH and (taken is None or base not in taken):
        return base
    digest = hashlib.sha1(f"{source}\x00{name}".encode()).hexdigest()
    for width in (8, 12, 16, 40):
        candidate = f"{base[: MAX_TOOL_ID_LENGTH - width - 1].rstrip('_')}_{digest[:width]}"
        if taken is None or candidate not in taken:
            return candidate
    raise CatalogError(f"cannot make a unique id for tool {name!r} of {source!r}: listed more than 5 times?")
