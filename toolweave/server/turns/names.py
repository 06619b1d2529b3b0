"""Published tool names that fit the client: ids over ``publish.name_budget`` get a shorter name.

Clients prefix what they show the model (Claude Code: ``mcp__<server>__<name>``) and model APIs cap
tool names (Anthropic: 64 characters), so a 64-character id can be too long once published. A name
over budget keeps a readable prefix of the id and ends in a hash of the *id*: the same tool gets the
same name in every process (stable across restarts, so a client may call a name it learnt earlier),
and the gateway maps it back to the id for calls. The upstream always gets its real tool name.
Pure: no I/O, no MCP.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable

__all__ = ["NameMap"]

_WIDTHS = (8, 12, 16, 40)


def _shortened(tool_id: str, budget: int, width: int) -> str:
    digest = hashlib.sha1(tool_id.encode()).hexdigest()[:width]
    return f"{tool_id[: budget - width - 1].rstrip('_')}_{digest}"


class NameMap:
    """Tool id <-> published name for one gateway; ``all_ids`` lists the registry's ids (for lookups
    of names this process has not published yet)."""

    def __init__(self, budget: int, all_ids: Callable[[], Iterable[str]]) -> None:
        self.budget = budget
        self._all_ids = all_ids
        self._name_of: dict[str, str] = {}
        self._id_of: dict[str, str] = {}

    def name(self, tool_id: str) -> str:
        """The name ``tool_id`` is published under (the id itself when it fits the budget)."""
        known = self._name_of.get(tool_id)
        if known is not None:
            return known
        if len(tool_id) <= self.budget:
            name = tool_id
        else:
            # Widen the hash on a collision (with a short id or another shortened one): never two
            # tools under one name. 8 hex digits collide about once in 4 billion pairs.
            name = next(n for w in _WIDTHS if (n := _shortened(tool_id, self.budget, w)) not in self._id_of)
        self._name_of[tool_id] = name
        self._id_of.setdefault(name, tool_id)
        return name

    def tool_id(self, name: str) -> str | None:
        """The id published as ``name``, if it is a shortened name (ids themselves are not mapped)."""
        found = self._id_of.get(name)
        if found is None and len(name) <= self.budget:
            # Not published by this process yet (e.g. learnt before a restart): name every long id.
            for tool_id in self._all_ids():
                if len(tool_id) > self.budget:
                    self.name(tool_id)
            found = self._id_of.get(name)
        return found if found is not None and found != name else None
