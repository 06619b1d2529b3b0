"""The commit log a follower reads: what the commits since the one it loaded changed, kind by kind."""

from __future__ import annotations

from toolweave.registry.changes import Changes, extend_log, since, union


def test_since_is_the_union_of_the_commits_after_the_loaded_one() -> None:
    log = extend_log([], 4, {"tools": ["a"]})
    log = extend_log(log, 5, {"tools": ["b"], "edges": ["x"]})
    log = extend_log(log, 6, {"edges": None})
    assert since(log, 3, 6) == {"tools": ["a", "b"], "edges": None}
    assert since(log, 4, 5) == {"tools": ["b"], "edges": ["x"]}
    assert since(log, 6, 6) == {}  # nothing committed since


def test_since_cannot_say_past_a_missing_or_whole_commit() -> None:
    log = extend_log(extend_log([], 5, {"tools": ["a"]}), 6, None)  # 6 changed everything
    assert since(log, 3, 5) is None  # generation 4 is not in the log
    assert since(log, 4, 6) is None
    assert since(log, 4, 5) == {"tools": ["a"]}


def test_union_lets_every_key_win_and_sorts_keys() -> None:
    assert union({"tools": ["b", "a"]}, {"tools": ["a", "c"]}) == {"tools": ["a", "b", "c"]}
    assert union({"tools": None}, {"tools": ["a"]}) == {"tools": None}
    assert union({"tools": ["a"]}, {"tools": None}) == {"tools": None}


def test_a_kind_past_the_key_cap_counts_as_changed_whole() -> None:
    changes = Changes()
    changes.touch("tools", (f"t{n}" for n in range(2_001)))
    changes.touch("edges", ["x"])
    assert changes.take() == {"tools": None, "edges": ["x"]}
    assert changes.take() == {}
