"""The published-set policy (pure): additive within a task, what the conversation no longer needs leaves at a
request that changes the list anyway, LRU eviction over max_tools, pinned first."""

from __future__ import annotations

import pytest

from toolweave.retrieval.turns import USED_KEPT
from toolweave.server.turns.publishing import PublishedSet


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
    s.touch("b", turn=2)  # in use: it stays though the next request does not choose it
    change = s.select(["c", "a"], turn=3)
    assert change.added == ("c",) and change.evicted == ()
    assert s.ids() == ["a", "b", "c"]  # existing tools keep their place: the cached prefix survives


def test_over_capacity_evicts_least_recently_relevant() -> None:
    s = PublishedSet(max_tools=3)
    s.select(["a", "b", "c"], turn=1)
    for tool_id in ("a", "b", "c"):  # all in use: none leaves for want of use
        s.touch(tool_id, turn=2)
    s.touch("a", turn=3)  # a was used last: it stays
    change = s.select(["d"], turn=4)
    assert change.added == ("d",)
    assert change.evicted == ("b",)  # b and c were last relevant at turn 2; b was added first
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


def test_an_unused_guess_leaves_when_the_next_request_adds_tools() -> None:
    s = PublishedSet(max_tools=40)
    s.select(["a", "b", "c"], turn=1)
    s.touch("a", turn=2)
    change = s.select(["d", "c"], turn=3)
    # b: chosen by the request before, never called, not chosen now -> it leaves; a is in use, c chosen again
    assert change.added == ("d",) and change.evicted == ("b",)
    assert s.ids() == ["a", "c", "d"]


def test_a_request_that_adds_nothing_removes_nothing() -> None:
    """The client's cached list stays whole in the middle of a task: no removal on its own."""
    s = PublishedSet(max_tools=40)
    s.select(["a", "b", "c"], turn=1)
    change = s.select(["a"], turn=2)
    assert not change.changed and s.ids() == ["a", "b", "c"]


def test_a_called_tool_stays_while_it_was_called_lately_then_leaves() -> None:
    s = PublishedSet(max_tools=40)
    s.select(["cd", "ls"], turn=1)
    s.touch("cd", turn=2)
    s.select(["mv"], turn=3)  # ls (never called) leaves, cd (called in the request before) stays
    assert s.ids() == ["cd", "mv"]
    for n in range(USED_KEPT):  # requests without it, each adding a tool: it stays USED_KEPT of them
        assert "cd" in s
        s.select([f"tool{n}"], turn=4 + n)
    assert "cd" not in s


def test_a_topic_move_clears_everything_the_new_request_does_not_choose() -> None:
    s = PublishedSet(max_tools=40, pinned=("p",))
    s.select(["cd", "ls"], turn=1)
    s.touch("cd", turn=2)
    change = s.select(["post_tweet", "ls"], turn=3, topic_moved=True)
    assert change.evicted == ("cd",) and s.ids() == ["p", "ls", "post_tweet"]


def test_a_next_step_is_a_guess_for_the_request_in_progress() -> None:
    s = PublishedSet(max_tools=40)
    s.select(["a"], turn=1)
    s.touch("a", turn=2)
    s.suggest(["b"], turn=2)
    s.select(["c"], turn=3)  # b, never called, was a guess for request 1
    assert s.ids() == ["a", "c"]


def test_the_standing_survives_a_replica_hand_over() -> None:
    s = PublishedSet(max_tools=40)
    s.select(["a", "b"], turn=1)
    s.touch("a", turn=2)
    other = PublishedSet(max_tools=40)
    other.restore(s.state(), s.standing_state())
    other.select(["c"], turn=3)
    assert other.ids() == ["a", "c"]
    old = PublishedSet(max_tools=40)  # a state saved without a standing: every tool chosen by the latest
    old.restore(s.state())
    old.select(["c"], turn=3)
    assert old.ids() == ["c"]


def test_the_server_in_use_is_read_from_the_calls(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("toolweave.retrieval.turns.SERVER_KEPT", 1)
    s = PublishedSet(max_tools=40)
    s.select(["fs__cd", "fs__ls", "kv__get"], turn=1)
    s.touch("fs__ls", turn=2)
    s.select(["fs__mv"], turn=3)  # fs is in use: its guess cd stays a request longer; kv's leaves
    assert s.ids() == ["fs__cd", "fs__ls", "fs__mv"]


def test_guesses_fill_the_set_only_up_to_the_size_given() -> None:
    s = PublishedSet(max_tools=40)
    s.select(["a", "b", "c"], turn=1)
    change = s.suggest(["d", "e", "f"], turn=1, up_to=4)  # one answer's size: room for one guess
    assert change.added == ("d",)
    assert s.ids() == ["a", "b", "c", "d"]
    assert s.suggest(["e"], turn=1, up_to=4).added == ()  # full: a guess never evicts either
    assert s.suggest(["e"], turn=1).added == ("e",)  # without a bound, max_tools is the room


def test_what_the_request_asks_for_may_fill_the_set_past_the_size_given() -> None:
    s = PublishedSet(max_tools=5)
    s.select(["a", "b", "c"], turn=1)
    change = s.suggest(["d", "e", "f", "g", "h"], turn=1, up_to=3, beyond={"f", "g", "h"})
    assert change.added == ("f", "g")  # d and e are guesses: no room; f and g fill it to max_tools
    assert s.ids() == ["a", "b", "c", "f", "g"]
