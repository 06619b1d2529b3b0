"""The published-set policy (pure): sticky, additive, LRU eviction over max_tools, pinned first."""

from __future__ import annotations

import pytest

from toolweave.server.publishing import PublishedSet


def test_same_choice_twice_changes_nothing() -> None:
    s = PublishedSet(max_tools=5)
    first = s.select(["a", "b", "c"], turn=1)
    assert first.added == ("a", "b", "c") and first.changed
    again = s.select(["a", "b", "c"], turn=2)
    assert not again.changed
    assert s.ids() == ["a", "b", "c"]


def test_new_task_appends_without_reordering() -> None:
    s = PublishedSet(max_tools=10)
    s.select(["a", "b"], turn=1)
    change = s.select(["c", "a"], turn=2)
    assert change.added == ("c",) and change.evicted == ()
    assert s.ids() == ["a", "b", "c"]  # existing tools keep their place: the cached prefix survives


def test_over_capacity_evicts_least_recently_relevant() -> None:
    s = PublishedSet(max_tools=3)
    s.select(["a", "b", "c"], turn=1)
    s.touch("a", turn=2)  # a was used: it stays
    change = s.select(["d"], turn=3)
    assert change.added == ("d",)
    assert change.evicted == ("b",)  # b and c were last relevant at turn 1; b was added first
    assert s.ids() == ["a", "c", "d"]


def test_current_choice_is_never_evicted_and_is_cut_to_capacity() -> None:
    s = PublishedSet(max_tools=2)
    s.select(["x"], turn=1)
    change = s.select(["a", "b", "c"], turn=2)
    assert set(s.ids()) == {"a", "b"}
    assert change.evicted == ("x",)


def test_pinned_first_and_outside_the_budget() -> None:
    s = PublishedSet(max_tools=2, pinned=("p",))
    assert s.ids() == ["p"]
    change = s.select(["a", "p", "b"], turn=1)
    assert change.added == ("a", "b")
    assert s.ids() == ["p", "a", "b"]
    assert "p" in s and len(s) == 3


def test_touch_never_adds_and_discard_removes() -> None:
    s = PublishedSet(max_tools=3)
    s.touch("ghost", turn=1)
    assert s.ids() == []
    s.select(["a", "b"], turn=1)
    gone = s.discard(["a", "zzz"])
    assert gone.evicted == ("a",) and s.ids() == ["b"]


def test_invalid_capacity() -> None:
    with pytest.raises(ValueError, match="max_tools"):
        PublishedSet(max_tools=0)
