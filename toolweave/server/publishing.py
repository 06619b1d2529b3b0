"""Which tools a session sees: the published-set policy. Pure: no I/O, no MCP, no clock.

Clients cache the tool list as part of their prompt; a list that changes every turn throws that cache
away. So the policy is additive and sticky:

* a ``find_tools`` turn *adds* the tools it chose (top-K + their dependencies) and marks them relevant
  at that turn; tools already published keep their place in the list (the order is insertion order);
* nothing is removed while the set fits in ``max_tools``; over it, the least-recently-relevant tools
  are evicted first (oldest insertion breaks ties), never a tool chosen in the current turn;
* a proxied call marks its tool relevant again, so tools in use stay; the tools that consume its
  output may be *suggested*, which adds them only into free room (a guess never evicts);
* pinned tools are always published, first, and do not count against ``max_tools``.

Consequences a test checks: the same query twice gives the same set (the second turn adds nothing),
and a new task only appends/evicts at the tail instead of reshuffling the list.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

__all__ = ["PublishChange", "PublishedSet"]


@dataclass(frozen=True, slots=True)
class PublishChange:
    """What one turn did to the set; ``changed`` is what decides a ``list_changed`` notification."""

    added: tuple[str, ...] = ()
    evicted: tuple[str, ...] = ()

    @property
    def changed(self) -> bool:
        return bool(self.added or self.evicted)


@dataclass
class PublishedSet:
    """A session's published tools (meta-tools excluded) and when each was last relevant."""

    max_tools: int
    pinned: tuple[str, ...] = ()
    # tool id -> turn at which it was last chosen or used; dict order is publication order
    _relevant_at: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.max_tools < 1:
            raise ValueError(f"max_tools must be >= 1, got {self.max_tools}")

    def ids(self) -> list[str]:
        """Published ids in a stable order: pinned first, then in the order they were added."""
        return list(self.pinned) + [t for t in self._relevant_at if t not in self.pinned]

    def __contains__(self, tool_id: object) -> bool:
        return tool_id in self._relevant_at or tool_id in self.pinned

    def __len__(self) -> int:
        return len(self.ids())

    def select(self, chosen: Sequence[str], turn: int) -> PublishChange:
        """Apply one ``find_tools`` turn: ``chosen`` is the ranked list (best first) the turn picked."""
        wanted: list[str] = []
        for tool_id in chosen:
            if tool_id not in self.pinned and tool_id not in wanted:
                wanted.append(tool_id)
        # More chosen than fit: keep the best-ranked ones (the ranking already put dependencies
        # right after what needs them, so the cut keeps the most useful prefix).
        wanted = wanted[: self.max_tools]
        added: list[str] = []
        for tool_id in wanted:
            if tool_id not in self._relevant_at:
                added.append(tool_id)
            self._relevant_at[tool_id] = turn
        evicted = self._evict(protect=set(wanted))
        return PublishChange(tuple(added), tuple(evicted))

    def suggest(self, candidates: Sequence[str], turn: int) -> PublishChange:
        """Add likely next steps (best first) only into free room: a guess never evicts a tool."""
        added: list[str] = []
        for tool_id in candidates:
            if len(self._relevant_at) >= self.max_tools:
                break
            if tool_id not in self and tool_id not in added:
                self._relevant_at[tool_id] = turn
                added.append(tool_id)
        return PublishChange(tuple(added))

    def touch(self, tool_id: str, turn: int) -> None:
        """A call used ``tool_id``: if published, it becomes recently relevant (never added here)."""
        if tool_id in self._relevant_at:
            self._relevant_at[tool_id] = turn

    def discard(self, tool_ids: Iterable[str]) -> PublishChange:
        """Drop tools that no longer exist (their upstream removed them)."""
        gone = [t for t in tool_ids if t in self._relevant_at]
        for tool_id in gone:
            del self._relevant_at[tool_id]
        return PublishChange(evicted=tuple(gone))

    def state(self) -> list[list[str | int]]:
        """The set as plain data (``[tool id, turn]`` in publication order), for a shared session store."""
        return [[tool_id, turn] for tool_id, turn in self._relevant_at.items()]

    def restore(self, state: Iterable[Sequence[object]]) -> None:
        """Replace the set with one saved by ``state()`` (malformed entries are skipped)."""
        self._relevant_at = {
            str(entry[0]): int(entry[1])
            for entry in state
            if len(entry) == 2 and isinstance(entry[0], str) and isinstance(entry[1], int)
        }

    def _evict(self, protect: set[str]) -> list[str]:
        over = len(self._relevant_at) - self.max_tools
        if over <= 0:
            return []
        order = {tool_id: i for i, tool_id in enumerate(self._relevant_at)}
        candidates = sorted(
            (t for t in self._relevant_at if t not in protect),
            key=lambda t: (self._relevant_at[t], order[t]),
        )
        evicted = candidates[:over]
        for tool_id in evicted:
            del self._relevant_at[tool_id]
        return evicted
