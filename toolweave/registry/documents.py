"""The enriched text of a tool: what gets embedded and full-text indexed.

Toolshed (Advanced RAG-Tool Fusion) showed that retrieval improves when a tool's document carries
more than its description: the name spelled as words, the argument names and descriptions, tags and
usage examples. The document stays within MiniLM's 256-token window: important parts come first.
"""

from __future__ import annotations

from typing import Any

from toolweave.names import name_words
from toolweave.records import ToolRecord

__all__ = ["tool_document"]

_MAX_PARAMS = 12
_MAX_CHARS = 1200


def tool_document(tool: ToolRecord, *, with_examples: bool = True) -> str:
    """The text that stands for ``tool`` in vector and full-text search.

    ``with_examples=False`` when the registry keeps usage vectors: examples appended to the document
    scored lower than the document alone (Tool2Vec keeps them in a vector of their own instead).
    """
    title = tool.title if tool.title and tool.title.lower() != tool.name.lower() else ""
    head = name_words(tool.name)
    lines = [f"{head}: {title + '. ' if title else ''}{tool.description.strip()}"]
    params = _parameter_phrases(tool.input_schema)
    if params:
        lines.append("Arguments: " + "; ".join(params[:_MAX_PARAMS]))
    if tool.tags:
        lines.append("Topics: " + ", ".join(tool.tags))
    if with_examples and tool.examples:
        lines.append("Examples: " + " | ".join(tool.examples[:5]))
    return "\n".join(lines)[:_MAX_CHARS]


def _parameter_phrases(schema: dict[str, Any]) -> list[str]:
    props = schema.get("properties") if isinstance(schema, dict) else None
    if not isinstance(props, dict):
        return []
    out = []
    for pname, prop in props.items():
        desc = prop.get("description", "") if isinstance(prop, dict) else ""
        words = name_words(pname)
        out.append(f"{words} ({desc.strip().rstrip('.')})" if desc else words)
    return out
