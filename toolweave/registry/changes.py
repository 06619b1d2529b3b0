"""What each commit changed, so that followers load the change instead of the whole registry.

A write notes what it touches, by kind: ``tools`` (the sources whose rows changed; none: the table's version
moved without a row changing, as an index build does), ``edges`` (the tools whose outgoing edges changed),
``usage`` (the tools whose usage examples changed), ``sources`` (source specs), ``traffic`` (the
learned-edge evidence), and whatever kind a new table brings (its book notes its keys under its own name and
gives the follower a way to load them: ``Follower.appliers``). The commit record carries the changes of its
last commits (``log``: generation → changes, bounded); a follower that loaded generation G and sees H loads
the union of the changes of G+1 … H, kind by kind, at the versions H names. It reloads everything when any
of those commits is not in the log (too far behind), changed everything (a reindex, a recovery, new graph
overrides) or changed a kind it does not know (a newer writer).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

__all__ = ["Changes", "Delta", "extend_log", "since", "union"]

Delta = dict[str, list[str] | None]
"""Kind → keys changed (None: every key of that kind, read that table whole)."""
KEY_CAP = 2_000
"""Keys of one kind in one commit beyond which the kind counts as changed whole (the log is a row)."""
LOG_COMMITS = 32
LOG_KEYS = 8_000
"""The log keeps the newest commits while they hold at most this many keys in all."""


class Changes:
    """What the write in progress changed (see the module docstring)."""

    def __init__(self) -> None:
        self._kinds: dict[str, set[str] | None] = {}
        self._everything = False

    def touch(self, kind: str, keys: Iterable[str] = ()) -> None:
        """``keys`` of ``kind`` changed (none: the kind's table moved without a key changing)."""
        known = self._kinds.setdefault(kind, set())
        if known is None:
            return
        known.update(keys)
        if len(known) > KEY_CAP:
            self._kinds[kind] = None

    def touch_all(self, kind: str) -> None:
        self._kinds[kind] = None

    def touch_some(self, kind: str, keys: Iterable[str] | None) -> None:
        """``keys`` of ``kind`` changed; None: an unknown set of them (followers read it whole)."""
        if keys is None:
            self.touch_all(kind)
        else:
            self.touch(kind, keys)

    def noted(self, kind: str) -> bool:
        return kind in self._kinds

    def everything(self) -> None:
        """A change followers must load whole (a reindex, a recovery, new overrides)."""
        self._everything = True

    def clear(self) -> None:
        self._kinds.clear()
        self._everything = False

    def take(self) -> Delta | None:
        """The changes for the commit record (None: everything), leaving none noted."""
        delta = (
            None
            if self._everything
            else {k: None if v is None else sorted(v) for k, v in self._kinds.items()}
        )
        self.clear()
        return delta


def extend_log(log: Sequence[Sequence[Any]], generation: int, delta: Delta | None) -> list[list[Any]]:
    """``log`` with ``generation``'s changes added, trimmed to the newest commits that fit."""
    out = [list(entry) for entry in log if entry[0] < generation] + [[generation, delta]]
    out = out[-LOG_COMMITS:]
    while len(out) > 1 and sum(_size(entry[1]) for entry in out) > LOG_KEYS:
        out.pop(0)
    return out


def since(log: Sequence[Sequence[Any]], loaded: int, head: int) -> Delta | None:
    """The changes between generation ``loaded`` and ``head`` (their union), or None when the log cannot
    say (a commit missing from it, or one that changed everything)."""
    entries: Mapping[int, Delta | None] = {int(g): d for g, d in log}
    deltas: list[Delta] = []
    for generation in range(loaded + 1, head + 1):
        delta = entries.get(generation)
        if delta is None:  # not in the log, or a commit that changed everything
            return None
        deltas.append(delta)
    return union(*deltas)


def union(*deltas: Delta) -> Delta:
    """The changes of all of ``deltas``, kind by kind (None, every key, wins)."""
    out: dict[str, set[str] | None] = {}
    for delta in deltas:
        for kind, keys in delta.items():
            known = out.setdefault(kind, set())
            if keys is None or known is None:
                out[kind] = None
            else:
                known.update(keys)
    return {k: None if v is None else sorted(v) for k, v in out.items()}


def _size(delta: Delta | None) -> int:
    if delta is None:
        return 1
    return sum(len(keys) if keys is not None else 1 for keys in delta.values())
