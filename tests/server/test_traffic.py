"""The traffic observer (toolweave/server/calls/traffic.py): what a call's arguments and result make it
see."""

from __future__ import annotations

import json
from typing import Any

import mcp_types as types
import pytest

from toolweave.server.calls import traffic
from toolweave.server.calls.traffic import TrafficObserver, specificity


def result(value: Any) -> types.CallToolResult:
    return types.CallToolResult(content=[], structured_content=value)


def text_result(value: Any) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=json.dumps(value))])


def flows(sightings: list[Any]) -> list[tuple[str, str, str, str, float]]:
    """The value-flow sightings: (consumer, parameter, producer, field, specificity)."""
    return [(s.consumer, s.parameter, s.producer, s.field, s.specificity) for s in sightings if s.parameter]


def test_a_value_from_a_result_in_a_later_argument_is_a_sighting_with_its_field() -> None:
    seen = TrafficObserver()
    assert (
        flows(seen.observe("s", "shop__place_order", {"item": "lamp"}, result({"order_id": "ORD-48213"}), 1))
        == []
    )
    got = seen.observe("s", "shop__get_order", {"order_id": "ORD-48213"}, result({"status": "open"}), 2)
    assert flows(got) == [("shop__get_order", "order_id", "shop__place_order", "order_id", 1.0)]
    [flow] = [s for s in got if s.parameter]
    assert flow.adjacent  # right after it, in the same turn
    # nested leaves: list items and dict paths; numbers compare by value (5 == 5.0)
    seen.observe("s", "shop__list", {}, result({"items": [{"sku": 48213.0}]}), 3)
    got = seen.observe("s", "shop__reorder", {"skus": [48213]}, result({}), 4)
    assert flows(got) == [("shop__reorder", "skus", "shop__list", "items[].sku", 1.0)]


def test_keys_that_are_values_are_abstracted_in_field_paths() -> None:
    """A result keyed by values (account ids, emails, dates) gives paths with ``*`` in their place: the
    path is stored in the registry, and a key is as observed as a value."""
    seen = TrafficObserver()
    accounts = {"accounts": {"acct-KEYLEAK-5521": {"account_id": "AC-99812"}, "USR005": {"n": 12446}}}
    seen.observe("s", "bank__list_accounts", {}, result(accounts), 1)
    seen.observe("s", "mail__inbox", {}, result({"bob@example.com": {"msg_id": "M-77123"}}), 2)
    got = seen.observe("s", "bank__balance", {"account_id": "AC-99812", "num": 12446}, result({}), 3)
    got += seen.observe("s", "mail__read", {"a.b@example.com": "M-77123"}, result({}), 4)
    assert sorted((s.parameter, s.field) for s in got if s.parameter) == [
        ("*", "*.msg_id"),
        ("account_id", "accounts.*.account_id"),
        ("num", "accounts.*.n"),
    ]
    assert traffic.leaves({"2024-01-01": 1, "userName": 2, "v2": 3, "x" * 41: 4}, 10) == [
        ("*", 1),
        ("userName", 2),
        ("v2", 3),
        ("*", 4),
    ]


def test_trivial_values_are_no_evidence() -> None:
    for value in (True, False, None, 0, 1, 7, -3, 0.5, "", "ok", "no", "success", "ab", "  x "):
        assert specificity(value) == 0.0, value
    seen = TrafficObserver()
    seen.observe("s", "a__status", {}, result({"ok": True, "count": 3, "state": "success", "n": None}), 1)
    got = seen.observe("s", "b__use", {"ok": True, "count": 3, "state": "success"}, result({}), 2)
    assert flows(got) == []


def test_specificity_grows_with_what_a_value_says() -> None:
    assert specificity(42) < specificity(421) < specificity(4213) < specificity(42137) == 1.0
    assert specificity("admin") < specificity("SFO") < specificity("AAPL") == 1.0
    assert specificity("ORD-7") == specificity("2024-05-01") == 1.0
    assert specificity(227.16) == 1.0 and specificity(2.5) == 0.25


def test_a_value_several_tools_returned_is_split_and_beyond_two_dropped() -> None:
    seen = TrafficObserver()
    seen.observe("s", "a__one", {}, result({"id": "XK-1029"}), 1)
    seen.observe("s", "b__two", {}, result({"ref": "XK-1029"}), 3)
    got = flows(seen.observe("s", "c__use", {"id": "XK-1029"}, result({}), 5))
    assert sorted(got) == [("c__use", "id", "a__one", "id", 0.5), ("c__use", "id", "b__two", "ref", 0.5)]
    seen.observe("s", "d__three", {}, result({"x": "XK-1029"}), 7)
    assert flows(seen.observe("s", "e__use", {"id": "XK-1029"}, result({}), 9)) == []


def test_a_tool_handing_back_its_argument_takes_the_value_over() -> None:
    seen = TrafficObserver()
    seen.observe("s", "shop__place_order", {}, result({"order_id": "ORD-48213"}), 1)
    seen.observe("s", "shop__get_order", {"order_id": "ORD-48213"}, result({"order_id": "ORD-48213"}), 2)
    got = flows(seen.observe("s", "shop__cancel", {"order_id": "ORD-48213"}, result({}), 3))
    assert got == [("shop__cancel", "order_id", "shop__get_order", "order_id", 1.0)]


def test_self_feeding_and_other_sessions_are_no_evidence() -> None:
    seen = TrafficObserver()
    seen.observe("s", "fs__ls", {}, result({"files": ["report-2024.txt"]}), 1)
    assert flows(seen.observe("s", "fs__ls", {"path": "report-2024.txt"}, result({}), 2)) == []
    assert flows(seen.observe("other", "fs__cat", {"file": "report-2024.txt"}, result({}), 1)) == []


def test_json_in_text_content_is_read_when_there_is_no_structured_content() -> None:
    seen = TrafficObserver()
    seen.observe("s", "a__make", {}, text_result({"token": "tok-99812"}), 1)
    assert flows(seen.observe("s", "b__use", {"token": "tok-99812"}, result({}), 2)) == [
        ("b__use", "token", "a__make", "token", 1.0)
    ]


def test_private_tools_are_never_observed() -> None:
    seen = TrafficObserver()
    assert seen.observe("s", "vault__get", {}, result({"secret": "sk-live-4242"}), 1, private=True) == []
    assert flows(seen.observe("s", "b__use", {"key": "sk-live-4242"}, result({}), 2)) == []  # not held
    seen.observe("s", "a__make", {}, result({"id": "ID-77120"}), 3)
    assert seen.observe("s", "vault__put", {"id": "ID-77120"}, result({}), 4, private=True) == []


def test_sequence_and_call_count_sightings() -> None:
    seen = TrafficObserver()
    first = seen.observe("s", "car__lock", {}, result({}), 1)
    assert [(s.consumer, s.producer) for s in first] == [("car__lock", "")]  # the call counted, once
    then = seen.observe("s", "car__brake", {}, result({}), 2)
    assert [(s.consumer, s.parameter, s.producer, s.adjacent) for s in then] == [
        ("car__brake", "", "car__lock", True),
        ("car__brake", "", "", False),
    ]
    # a find_tools (turn 3) between two calls: not the same turn, no sequence
    assert [s for s in seen.observe("s", "car__start", {}, result({}), 4) if s.producer] == []
    assert [s for s in seen.observe("s", "car__lock", {}, result({}), 5) if not s.producer] == []  # counted


def test_the_window_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(traffic, "WINDOW_CALLS", 4)
    monkeypatch.setattr(traffic, "WINDOW_VALUES", 8)
    monkeypatch.setattr(traffic, "MAX_SESSIONS", 2)
    seen = TrafficObserver()
    seen.observe("s", "a__make", {}, result({"id": "ID-10001"}), 1)
    for n in range(4):
        seen.observe("s", f"x__noise{n}", {}, result({}), 2 + n)
    assert flows(seen.observe("s", "b__use", {"id": "ID-10001"}, result({}), 9)) == []  # 5 calls ago
    seen.observe("s", "a__many", {}, result({"ids": [f"ID-{n:05}" for n in range(20)]}), 10)
    assert len(seen._windows["s"].values) == 8
    assert flows(seen.observe("s", "b__use", {"id": "ID-00019"}, result({}), 11))  # the newest kept
    assert flows(seen.observe("s", "b__use", {"id": "ID-00001"}, result({}), 12)) == []  # the oldest gone
    seen.observe("t", "a__make", {}, result({}), 1)
    seen.observe("u", "a__make", {}, result({}), 1)
    assert list(seen._windows) == ["t", "u"]


def test_leaves_hashed_per_result_are_capped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(traffic, "MAX_LEAVES", 3)
    seen = TrafficObserver()
    seen.observe("s", "a__many", {}, result({"ids": [f"ID-{n:05}" for n in range(10)]}), 1)
    assert len(seen._windows["s"].values) == 3
    assert flows(seen.observe("s", "b__use", {"id": "ID-00002"}, result({}), 2))
    assert flows(seen.observe("s", "b__use", {"id": "ID-00003"}, result({}), 3)) == []


def test_the_window_holds_keyed_hashes_never_values() -> None:
    seen, other = TrafficObserver(), TrafficObserver()
    for observer in (seen, other):
        observer.observe("s", "a__make", {}, result({"id": "ID-31337"}), 1)
    [held] = list(seen._windows["s"].values)
    [held_elsewhere] = list(other._windows["s"].values)
    assert b"31337" not in held and held != held_elsewhere  # another process's key: not comparable
    assert seen._windows["s"].key != other._windows["s"].key
