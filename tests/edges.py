"""Dependency edges for test data, written as what they say: ``edge(tool, depends_on, parameter)``."""

from __future__ import annotations

from typing import Any

from toolweave.records import DependencyEdge, EdgeKind

__all__ = ["edge"]


def edge(tool: str, depends_on: str, parameter: str | None = None, **fields: Any) -> DependencyEdge:
    """``tool`` needs ``depends_on``: through its input ``parameter`` when given (a direct parameter
    dependency unless ``kind=`` says otherwise), else as a whole. Other ``fields`` as DependencyEdge's."""
    direct = (
        EdgeKind.TOOL_DIRECTLY_DEPENDS_ON if parameter is None else EdgeKind.PARAMETER_DIRECTLY_DEPENDS_ON
    )
    fields.setdefault("kind", direct)
    return DependencyEdge(tool=tool, depends_on=depends_on, parameter_name=parameter, **fields)
