"""Bounds for YAML we are handed (manifests, OpenAPI specs): a document must not cost unbounded memory.

YAML aliases let a few hundred bytes describe billions of nodes ("billion laughs": nine levels of ten
aliases each). The parser itself stays small (aliases share one node), but anything that walks the
result (our manifest composer, JSON conversion, validation) expands it. So the composed node graph is
measured *before* anything walks it: the expanded node count is computed with memoisation (cost
proportional to the document, not to its expansion) and a document over the limit is refused with
one line. Used by ``toolweave.manifest`` and ``toolweave.adapters.openapi.loader``.
"""

from __future__ import annotations

from yaml.nodes import MappingNode, Node, SequenceNode

__all__ = ["MAX_EXPANDED_NODES", "MAX_YAML_CHARS", "expansion_problem", "size_problem"]

MAX_EXPANDED_NODES = 2_000_000
"""Nodes after alias expansion. GitHub's 4 MB REST spec has well under a million; a nine-level
billion-laughs document has 10^9."""

MAX_YAML_CHARS = 64 * 1024 * 1024
"""Characters in one YAML/JSON document (GitHub's full REST spec is ~12 MB as YAML)."""


def size_problem(text: str, limit: int = MAX_YAML_CHARS) -> str | None:
    """Why ``text`` is too large to parse, or None."""
    if len(text) > limit:
        return f"document of {len(text):,} characters is larger than the {limit:,} allowed"
    return None


def expansion_problem(root: Node | None, limit: int = MAX_EXPANDED_NODES) -> str | None:
    """Why the composed document ``root`` is unsafe to walk (too many nodes once aliases are expanded,
    or a recursive alias), or None. Iterative, so deep documents cannot overflow the stack."""
    if root is None:
        return None
    sizes: dict[int, int] = {}
    in_progress: set[int] = set()
    stack: list[tuple[Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        if key in sizes and not children_done:
            continue
        children = _children(node)
        if not children_done:
            if key in in_progress:
                return "recursive YAML aliases (an alias inside the node it names) are not supported"
            in_progress.add(key)
            stack.append((node, True))
            for child in children:
                if id(child) in in_progress:
                    return "recursive YAML aliases (an alias inside the node it names) are not supported"
                if id(child) not in sizes:
                    stack.append((child, False))
            continue
        in_progress.discard(key)
        total = 1 + sum(sizes[id(child)] for child in children)
        if total > limit:
            return (
                f"YAML aliases expand to more than {limit:,} nodes (a 'billion laughs' document?); "
                "refusing to load it"
            )
        sizes[key] = total
    return None


def _children(node: Node) -> list[Node]:
    if isinstance(node, MappingNode):
        return [part for pair in node.value for part in pair]
    if isinstance(node, SequenceNode):
        return list(node.value)
    return []
