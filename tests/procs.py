"""Processes as /proc shows them (Linux), for the tests that check what is left running."""

from __future__ import annotations

from pathlib import Path

__all__ = ["alive", "descendants", "group", "stat"]


def stat(pid: int) -> tuple[str, int, int] | None:
    """(state, parent pid, process group) of ``pid``; None when it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    state, parent, pgid = text[text.rindex(")") + 2 :].split()[:3]  # after "(comm)", comm may hold spaces
    return state, int(parent), int(pgid)


def alive(pid: int) -> bool:
    """Running or sleeping: not gone, not a zombie waiting to be reaped."""
    found = stat(pid)
    return found is not None and found[0] not in ("Z", "X")


def _all() -> dict[int, tuple[str, int, int]]:
    return {int(p.name): s for p in Path("/proc").glob("[0-9]*") if (s := stat(int(p.name))) is not None}


def group(pgid: int) -> list[int]:
    """The live members of process group ``pgid``."""
    return [pid for pid, (state, _, g) in _all().items() if g == pgid and state not in ("Z", "X")]


def descendants(pid: int) -> set[int]:
    """Every process under ``pid`` (children, grandchildren, ...)."""
    parents = {child: s[1] for child, s in _all().items()}
    found: set[int] = set()
    frontier = {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found
