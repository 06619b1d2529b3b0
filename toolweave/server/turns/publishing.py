"""Which tools a session sees: the published-set policy. Pure: no I/O, no MCP, no clock.

Clients cache the tool list as part of their prompt; a list that changes every turn throws that cache
away, and a list that only grows keeps every finished sub-task's guesses. So the policy is additive
within a task:

* a ``find_tools`` turn *adds* the tools it chose (top-K + their dependencies) and marks them relevant
  at that turn; tools already published keep their place in the list (the order is insertion order);
* over ``max_tools``, the least-recently-relevant tools
  are evicted first (oldest insertion breaks ties), never a tool chosen in the current turn;
* a proxied call marks its tool relevant again, so tools in use stay; the tools that consume its
  output may be *suggested*, which adds them only into free room (a guess never evicts), up to a size the
  caller gives (the engine: one answer's ``final_k``; what the request itself asks for may go past it);
* pinned tools are always published, first, and do not count against ``max_tools``;
* what the conversation no longer needs leaves at a request that changes the list anyway (a finished
  sub-task's guesses, an unrelated server's tools once the topic moved): ``retrieval.turns.leaving``
  decides, from each tool's ``Standing`` (the request that last chose it, the last in which it was called).

Consequences a test checks: the same query twice gives the same set (the second turn adds nothing),
and a new task only appends/evicts at the tail instead of reshuffling the list.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from toolweave.retrieval.turns import USED_KEPT, Standing, leaving

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
    requests: int = 0
    """Requests (find_tools or host turns) so far: the clock of ``_chosen`` and ``_used``."""
    # tool id -> the request that last chose it (published tools only)
    _chosen: dict[str, int] = field(default_factory=dict)
    # tool id -> the request in which it was last called (any tool: one reached through call_tool is
    # published only after the call)
    _used: dict[str, int] = field(default_factory=dict)

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

    def select(
        self,
        chosen: Sequence[str],
        turn: int,
        *,
        topic_moved: bool = False,
        unseen: Collection[str] = (),
    ) -> PublishChange:
        """Apply one request (a ``find_tools`` or host turn): ``chosen`` is the ranked list (best first) it
        picked; ``topic_moved``: the request is unrelated to the conversation before it; ``unseen``: tools
        it could not choose (their server is unavailable): they do not leave for it."""
        self.requests += 1
        # a call older than that keeps nothing published (``leaving``): forget it, or a long session grows
        self._used = {t: r for t, r in self._used.items() if self.requests - r <= USED_KEPT}
        wanted: list[str] = []
        for tool_id in chosen:
            if tool_id not in self.pinned and tool_id not in wanted:
                wanted.append(tool_id)
        # More chosen than fit: keep the best-ranked ones (the ranking already put dependencies
        # right after what needs them, so the cut keeps the most useful prefix).
        wanted = wanted[: self.max_tools]
        added = [t for t in wanted if t not in self._relevant_at]
        gone = leaving(
            self.standing(),
            self.requests,
            wanted,
            topic_moved=topic_moved,
            changed=bool(added),
            unseen=unseen,
        )
        for tool_id in gone:
            self._drop(tool_id)
        for tool_id in wanted:
            self._relevant_at[tool_id] = turn
            self._chosen[tool_id] = self.requests
        evicted = gone + self._evict(protect=set(wanted))
        return PublishChange(tuple(added), tuple(evicted))

    def suggest(
        self, candidates: Sequence[str], turn: int, *, up_to: int | None = None, beyond: Collection[str] = ()
    ) -> PublishChange:
        """Add likely next steps (best first) only into free room: a guess never evicts a tool. ``up_to``:
        the set's size they may fill it to (default ``max_tools``); those in ``beyond`` (what the request
        asks for) may fill it past that, up to ``max_tools``."""
        added: list[str] = []
        for tool_id in candidates:
            room = self.max_tools if up_to is None or tool_id in beyond else min(up_to, self.max_tools)
            if tool_id not in self and tool_id not in added and len(self._relevant_at) < room:
                self._relevant_at[tool_id] = turn
                self._chosen[tool_id] = self.requests  # a guess for the request in progress
                added.append(tool_id)
        return PublishChange(tuple(added))

    def touch(self, tool_id: str, turn: int) -> None:
        """A call used ``tool_id``: if published, it becomes recently relevant (never added here); either
        way it counts as in use by the request in progress."""
        self._used[tool_id] = self.requests
        if tool_id in self._relevant_at:
            self._relevant_at[tool_id] = turn

    def standing(self) -> dict[str, Standing]:
        """Each published tool (pinned ones aside: they never leave) and why it is there."""
        servers: dict[str, int] = {}
        for tool_id, request in self._used.items():
            source = _source(tool_id)
            servers[source] = max(request, servers.get(source, request))
        return {
            t: Standing(self._chosen.get(t, self.requests), self._used.get(t), servers.get(_source(t)))
            for t in self._relevant_at
        }

    def discard(self, tool_ids: Iterable[str]) -> PublishChange:
        """Drop tools that no longer exist (their upstream removed them)."""
        gone = [t for t in tool_ids if t in self._relevant_at]
        for tool_id in gone:
            self._drop(tool_id)
        return PublishChange(evicted=tuple(gone))

    def state(self) -> list[list[str | int]]:
        """The set as plain data (``[tool id, turn]`` in publication order), for a shared session store."""
        return [[tool_id, turn] for tool_id, turn in self._relevant_at.items()]

    def standing_state(self) -> dict[str, object]:
        """The request clock and each tool's standing as plain data (beside ``state()``: a replica that
        does not know it reads the set as before)."""
        return {"requests": self.requests, "chosen": dict(self._chosen), "used": dict(self._used)}

    def restore(
        self, state: Iterable[Sequence[object]], standing: Mapping[str, object] | None = None
    ) -> None:
        """Replace the set with one saved by ``state()`` and ``standing_state()`` (malformed entries are
        skipped; without a standing, every tool counts as chosen by the latest request)."""
        self._relevant_at = {
            str(entry[0]): int(entry[1])
            for entry in state
            if len(entry) == 2 and isinstance(entry[0], str) and isinstance(entry[1], int)
        }
        standing = standing or {}
        requests = standing.get("requests")
        self.requests = requests if isinstance(requests, int) else self.requests
        chosen = _turns(standing.get("chosen"))
        self._chosen = {t: chosen.get(t, self.requests) for t in self._relevant_at}
        self._used = _turns(standing.get("used"))

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
            self._drop(tool_id)
        return evicted

    def _drop(self, tool_id: str) -> None:
        del self._relevant_at[tool_id]
        self._chosen.pop(tool_id, None)


def _source(tool_id: str) -> str:
    return tool_id.partition("__")[0]  # ToolRecord.id is ``<source>__<name>``


def _turns(raw: object) -> dict[str, int]:
    if not isinstance(raw, dict):
        return {}
    return {str(k): v for k, v in raw.items() if isinstance(v, int)}
