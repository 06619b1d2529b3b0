"""What retrieval returns: ranked tools and why each is there (``Hit``, a first-pass candidate, is the
registry's search result: defined in ``toolweave.records``, re-exported here)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from toolweave.records import EdgeKind, Hit

__all__ = ["Hit", "RankedTool"]


@dataclass(frozen=True, slots=True)
class RankedTool:
    """One entry of the final list.

    ``reason`` is ``"first_pass"`` for a search hit (``score`` is its first-pass score) or
    ``"dependency"`` for a tool reached by walking the graph from ``via`` along ``edge_kind``
    (``parameter_name`` says which parameter it feeds, when the edge says so), ``depth`` hops away.
    ``publish`` says whether the tool is strong enough to be published unasked: a search hit above the
    relevance floor, or a dependency of one (see ``retrieval/floor.py``). The list itself is never cut.
    """

    tool_id: str
    rank: int
    reason: Literal["first_pass", "dependency"]
    score: float
    via: str | None = None
    edge_kind: EdgeKind | None = None
    parameter_name: str | None = None
    depth: int = 0
    publish: bool = True

    def explain(self) -> str:
        """A short human sentence, for the CLI and for `find_tools` results."""
        if self.reason == "first_pass":
            return f"search hit (score {self.score:.3f})"
        param = f", parameter {self.parameter_name}" if self.parameter_name else ""
        return f"dependency of {self.via} ({self.edge_kind}{param})"
