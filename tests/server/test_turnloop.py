"""The turn loop in process (real registry + embedder, in-test backends), both protocol eras: results held
until the client re-listed, names within the budget, next steps after a call, turns told by the host."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest
from mcp import Client

from tests.e2e.watch import Relister, relisting
from tests.edges import edge
from tests.registry.inference.test_dataflow_datasets import demo_fleet
from toolweave.retrieval.turns import FOLLOW_UP_WORDS, conversation_context, tool_act
from toolweave.server.gateway import Gateway
from toolweave.server.turns.names import NameMap

from .helpers import NOTE_EDGE, FakeBackend, fake_backends, names, notes_tools, time_tools, tool
from .test_gateway import make_gateway, structured

pytestmark = pytest.mark.anyio

MODES = ["legacy", "auto"]


@asynccontextmanager
async def relisting_gateway(gateway: Gateway, mode: str) -> AsyncIterator[tuple[Client, Relister]]:
    relister = Relister()
    async with Client(gateway.server, mode=mode, message_handler=relister.on_message) as client:
        for backend in fake_backends(gateway):
            with anyio.fail_after(20):
                await backend.reported.wait()
        async with relisting(client, relister):
            yield client, relister


@pytest.fixture
def backends() -> tuple[FakeBackend, FakeBackend]:
    return FakeBackend("clock", time_tools()), FakeBackend("notes", notes_tools(), [NOTE_EDGE])


@pytest.mark.parametrize("mode", MODES)
async def test_find_tools_answers_after_the_client_relisted(registry: Any, backends: Any, mode: str) -> None:
    gateway = make_gateway(registry, *backends, relist_wait_ms=5000, relist_probe_ms=5000)
    async with relisting_gateway(gateway, mode) as (client, relister):
        found = await client.call_tool("find_tools", {"query": "what time is it in Tokyo", "k": 2})
        # No waiting here: the re-list must already have landed when the result arrives.
        assert relister.lists, "find_tools answered before the client re-listed"
        assert "clock__get_current_time" in relister.lists[-1]
        assert structured(found)["tool_list_changed"] is True
        session = next(iter(gateway.sessions))
        assert session.relists_on_notice and session.listed_notices == session.notices == 1


async def test_no_wait_when_the_client_cannot_hear(registry: Any, backends: Any) -> None:
    # A 2026-era client without a listen stream never hears list_changed: never hold its result
    # (a hold would time out and flip relists_on_notice; the 60 s wait would also fail the test's timeout).
    gateway = make_gateway(registry, *backends, relist_wait_ms=5000, relist_probe_ms=5000)
    async with Client(gateway.server, mode="auto") as client:
        with anyio.fail_after(20):
            await backends[0].reported.wait()
        assert client.protocol_version == "2026-07-28"
        found = await client.call_tool("find_tools", {"query": "what time is it in Tokyo", "k": 2})
        assert structured(found)["tool_list_changed"] is True
        session = next(iter(gateway.sessions))
        assert session.notices == 1 and session.relists_on_notice is True


LONG = "list_every_pull_request_review_comment_for_a_repository_in_an_organization"


async def test_long_ids_are_published_within_the_name_budget(registry: Any) -> None:
    long_tool = tool("github", LONG, "List the review comments on pull requests of a repository.", {})
    backend = FakeBackend("github", [long_tool])
    gateway = make_gateway(
        registry,
        backend,
        FakeBackend("clock", time_tools()),
        name_budget=32,
        relist_wait_ms=5000,
        relist_probe_ms=5000,
    )
    async with relisting_gateway(gateway, "legacy") as (client, relister):
        found = structured(await client.call_tool("find_tools", {"query": "pull request review comments"}))
        listed = relister.lists[-1]
        assert all(len(n) <= 32 for n in listed), listed
        published = next(n for n in listed if n.startswith("github__list_every"))
        assert published != long_tool.id and len(published) == 32
        # find_tools names the tool exactly as the tool list does
        assert published in [t["name"] for t in found["tools"]]
        # direct call by the published name, call_tool by published name and by full id
        assert not (await client.call_tool(published, {})).is_error
        via_name = await client.call_tool("call_tool", {"name": published, "arguments": {}})
        via_id = await client.call_tool("call_tool", {"name": long_tool.id, "arguments": {}})
        assert not via_name.is_error and not via_id.is_error
        assert [c[0] for c in backend.calls] == [LONG, LONG, LONG]  # upstream gets its real name
    # Stable across restarts: a fresh map names it alike and resolves a name it never published.
    fresh = NameMap(32, lambda: [long_tool.id, "clock__get_current_time"])
    assert fresh.tool_id(published) == long_tool.id
    assert fresh.name(long_tool.id) == published


def test_name_map_is_collision_free_and_leaves_short_ids_alone() -> None:
    ids = [f"source__{'x' * 40}_{n}" for n in range(200)]
    names_ = NameMap(24, lambda: ids)
    published = [names_.name(i) for i in ids]
    assert len(set(published)) == len(ids) and all(len(n) <= 24 for n in published)
    assert names_.name("clock__now") == "clock__now" and names_.tool_id("clock__now") is None
    assert all(names_.tool_id(n) == i for n, i in zip(published, ids, strict=True))


@pytest.mark.parametrize("mode", MODES)
async def test_a_call_publishes_the_tools_that_consume_its_output(
    registry: Any, backends: Any, mode: str
) -> None:
    gateway = make_gateway(registry, *backends, relist_wait_ms=5000, relist_probe_ms=5000)
    async with relisting_gateway(gateway, mode) as (client, relister):
        assert "notes__delete_note" not in names(await client.list_tools(cache_mode="bypass"))
        called = await client.call_tool(
            "call_tool", {"name": "notes__search_notes", "arguments": {"keyword": "x"}}
        )
        assert not called.is_error
        assert relister.lists and "notes__delete_note" in relister.lists[-1]  # delete_note needs a note id


async def test_a_call_never_evicts_for_a_guess(registry: Any, backends: Any) -> None:
    gateway = make_gateway(registry, *backends, max_tools=1, relist_wait_ms=5000, relist_probe_ms=5000)
    async with relisting_gateway(gateway, "legacy") as (client, _relister):
        await client.call_tool("find_tools", {"query": "what time is it in Tokyo", "k": 1})
        await client.call_tool("call_tool", {"name": "notes__search_notes", "arguments": {"keyword": "x"}})
        assert names(await client.list_tools(cache_mode="bypass"))[2:] == ["clock__get_current_time"]


@pytest.mark.parametrize("mode", MODES)
async def test_host_turn_publishes_before_any_find_tools(registry: Any, backends: Any, mode: str) -> None:
    gateway = make_gateway(registry, *backends, relist_wait_ms=5000, relist_probe_ms=5000)
    async with relisting_gateway(gateway, mode) as (client, relister):
        await client.list_tools(cache_mode="bypass")  # the client is connected, as Claude Code is
        report = await gateway.turns.hear_turn("what time is it in Tokyo")
        assert report["sessions"][0]["tool_list_changed"] is True
        assert "clock__get_current_time" in relister.lists[-1]  # re-listed before hear_turn returned


async def test_turns_are_context_until_the_topic_shifts(registry: Any, backends: Any) -> None:
    gateway = make_gateway(registry, *backends, relist_wait_ms=5000, relist_probe_ms=5000)
    async with relisting_gateway(gateway, "legacy") as (client, _relister):
        await client.list_tools(cache_mode="bypass")
        await gateway.turns.hear_turn("what time is it in Tokyo")
        await client.call_tool("find_tools", {"query": "and in Paris?"})
        session = next(iter(gateway.sessions))
        assert session.context() == ["what time is it in Tokyo", "and in Paris?"]
        await gateway.turns.hear_turn("search my saved notes for the shopping list")
        assert session.context() == ["search my saved notes for the shopping list"]


async def test_a_new_topic_takes_the_old_topics_tools_off_the_list(registry: Any, backends: Any) -> None:
    """The published set grows only with what the conversation still needs: once the topic moves, the
    clock tools (even the one called) leave the client's list, which holds the notes tools instead."""
    gateway = make_gateway(registry, *backends, relist_wait_ms=5000, relist_probe_ms=5000)
    async with relisting_gateway(gateway, "legacy") as (client, relister):
        await client.list_tools(cache_mode="bypass")
        await gateway.turns.hear_turn("what time is it in Tokyo")
        assert "clock__get_current_time" in relister.lists[-1]
        called = await client.call_tool("clock__get_current_time", {"timezone": "Asia/Tokyo"})
        assert not called.is_error
        await gateway.turns.hear_turn("search my saved notes for the shopping list")
        listed = relister.lists[-1]
        assert "notes__search_notes" in listed
        assert not [n for n in listed if n.startswith("clock__")], listed


async def test_no_usable_runtime_dir_means_no_host_channel_not_a_dead_gateway(
    registry: Any, backends: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    from toolweave.server.fronts.host import host_channel

    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "missing"))
    async with host_channel(make_gateway(registry, *backends)) as path:
        assert path is None


async def test_a_host_turn_that_comes_before_the_clients_session_is_in_its_first_list(
    registry: Any, backends: Any
) -> None:
    # Claude Code runs its prompt hook while it still connects to the gateway it just spawned.
    gateway = make_gateway(registry, *backends, relist_wait_ms=5000, relist_probe_ms=5000)
    reports: list[dict[str, Any]] = []
    async with Client(gateway.server, mode="legacy") as client:
        for backend in fake_backends(gateway):
            with anyio.fail_after(20):
                await backend.reported.wait()
        assert not list(gateway.sessions)  # no request yet: the turn has nobody to publish to
        async with anyio.create_task_group() as tg:

            async def hear() -> None:
                reports.append(await gateway.turns.hear_turn("what time is it in Tokyo", first_session=True))

            tg.start_soon(hear)
            with anyio.fail_after(20):  # the turn arrives first, and waits for the first session
                while not gateway.turns.has_pending_turn():
                    await anyio.sleep(0.01)
            first = names(await client.list_tools(cache_mode="bypass"))
    assert "clock__get_current_time" in first  # the very first list carries the turn's tools
    assert reports[0]["sessions"] and reports[0]["sessions"][0]["tool_list_changed"] is True


async def test_a_turn_for_nobody_is_not_given_to_whoever_connects_next(registry: Any, backends: Any) -> None:
    # On HTTP the turn endpoint is not tied to one client: a turn with no session must not reach the next
    # client that happens to connect (that could be somebody else's conversation).
    gateway = make_gateway(registry, *backends, relist_wait_ms=5000, relist_probe_ms=5000)
    async with Client(gateway.server, mode="legacy") as client:
        for backend in fake_backends(gateway):
            with anyio.fail_after(20):
                await backend.reported.wait()
        report = await gateway.turns.hear_turn("what time is it in Tokyo")
        assert report == {"sessions": []}
        assert "clock__get_current_time" not in names(await client.list_tools(cache_mode="bypass"))


def inferred(tool_id: str, confidence: float, parameter: str | None = None) -> Any:
    """An inferred edge ``tool_id ← clock__get_current_time`` of the given confidence."""
    return edge(
        tool_id, "clock__get_current_time", parameter, origin="inferred", confidence=confidence, evidence="t"
    )


async def test_next_steps_are_at_most_three_the_most_confident_first(registry: Any, backends: Any) -> None:
    gateway = make_gateway(registry, *backends, relist_wait_ms=5000, relist_probe_ms=5000)
    async with relisting_gateway(gateway, "legacy") as (client, relister):
        registry.add_edges(
            [
                inferred("notes__search_notes", 0.6, "keyword"),
                inferred("clock__convert_time", 0.55, "time"),
                inferred("notes__create_note", 0.9, "body"),
                inferred("notes__delete_note", 0.7),
            ]
        )
        before = names(await client.list_tools(cache_mode="bypass"))
        await client.call_tool(
            "call_tool", {"name": "clock__get_current_time", "arguments": {"timezone": "UTC"}}
        )
        added = [n for n in relister.lists[-1] if n not in before]
        # the tool in use (reached through call_tool), then three guesses
        assert added == [
            "clock__get_current_time",
            "notes__create_note",
            "notes__delete_note",
            "notes__search_notes",
        ]


async def test_a_weak_guess_is_never_a_next_step(registry: Any, backends: Any) -> None:
    gateway = make_gateway(registry, *backends, relist_wait_ms=5000, relist_probe_ms=5000)
    async with relisting_gateway(gateway, "legacy") as (client, _relister):
        registry.add_edges([inferred("clock__convert_time", 0.333, "time")])  # a shared parameter name
        await client.call_tool(
            "call_tool", {"name": "clock__get_current_time", "arguments": {"timezone": "UTC"}}
        )
        assert "clock__convert_time" not in names(await client.list_tools(cache_mode="bypass"))


async def test_the_rest_of_a_two_part_request_follows_the_call_that_served_one_part(
    registry: Any, backends: Any
) -> None:
    gateway = make_gateway(registry, *backends, relist_wait_ms=5000, relist_probe_ms=5000)
    async with relisting_gateway(gateway, "legacy") as (client, relister):
        request = "what time is it in Tokyo and create a note titled standup with the agenda"
        found = await client.call_tool("find_tools", {"query": request, "k": 1})
        assert [t["name"] for t in structured(found)["tools"]] == ["notes__create_note"]  # the note wins
        assert "clock__get_current_time" not in relister.lists[-1]
        await client.call_tool("notes__create_note", {"title": "standup"})
        assert "clock__get_current_time" in relister.lists[-1]  # the part the note did not serve


async def test_a_tool_reached_through_call_tool_is_published_after_it(registry: Any, backends: Any) -> None:
    # the model found it without it being listed; it is in use now, and often comes again (cd, cd)
    gateway = make_gateway(registry, *backends, relist_wait_ms=5000)
    async with relisting_gateway(gateway, "legacy") as (client, relister):
        assert "clock__convert_time" not in names(await client.list_tools(cache_mode="bypass"))
        arguments = {"source_timezone": "UTC", "time": "10:00", "target_timezone": "Asia/Tokyo"}
        called = await client.call_tool("call_tool", {"name": "clock__convert_time", "arguments": arguments})
        assert not called.is_error
        assert "clock__convert_time" in relister.lists[-1]


def scores(found: dict[str, Any]) -> dict[str, str]:
    return {t["name"]: t["why"] for t in found["tools"]}  # "search hit (score 1.489)"


async def test_a_turn_that_stands_alone_is_ranked_without_the_conversation(
    registry: Any, backends: Any
) -> None:
    gateway = make_gateway(registry, *backends, relist_wait_ms=5000)
    async with relisting_gateway(gateway, "legacy") as (client, _relister):
        await client.call_tool("find_tools", {"query": "what time is it in Tokyo"})
        long_turn = "and now tell me what the current local time is over in Paris, France please"
        assert len(long_turn.split()) >= FOLLOW_UP_WORDS
        carried = structured(await client.call_tool("find_tools", {"query": long_turn, "detail": True}))
        short_turn = "and in Paris?"
        follow_up = structured(await client.call_tool("find_tools", {"query": short_turn, "detail": True}))
        session = next(iter(gateway.sessions))
        assert session.context() == ["what time is it in Tokyo", long_turn, short_turn]  # all still context
    fresh = make_gateway(registry, *backends, relist_wait_ms=5000)
    async with relisting_gateway(fresh, "legacy") as (client, _relister):
        alone = structured(await client.call_tool("find_tools", {"query": long_turn, "detail": True}))
        short_alone = structured(await client.call_tool("find_tools", {"query": short_turn, "detail": True}))
    assert scores(carried) == scores(alone)  # the earlier turn did not move the long one
    assert scores(follow_up) != scores(short_alone)  # a short follow-up still leans on the conversation


def test_conversation_context_is_for_short_follow_ups_only() -> None:
    earlier = ["what time is it in Tokyo"]
    assert conversation_context("and in Paris?", earlier) == earlier
    assert conversation_context(" ".join(["word"] * FOLLOW_UP_WORDS), earlier) == []


async def test_after_a_call_the_parts_of_the_request_after_it_come_first(
    registry: Any, backends: Any
) -> None:
    gateway = make_gateway(registry, *backends, relist_wait_ms=5000)
    async with relisting_gateway(gateway, "legacy") as (client, relister):
        request = (
            "tell me what time it is in Tokyo, then create a note titled standup, "
            "then search my saved notes for the weekly agenda"
        )
        await client.call_tool("find_tools", {"query": request, "k": 1})
        before = names(await client.list_tools(cache_mode="bypass"))
        await client.call_tool("call_tool", {"name": "notes__create_note", "arguments": {"title": "standup"}})
        added = [n for n in relister.lists[-1] if n not in before]
        assert "notes__search_notes" in before  # the request's best: the last part's tool
        # the tool in use, then the part after the one it served (the notes part: its best tool not yet
        # listed) before the part that came earlier (the time)
        assert added[0] == "notes__create_note" and added[1].startswith("notes__"), added
        assert "clock__get_current_time" in added


async def test_remember_after_the_git_call_publishes_a_memory_write_not_a_delete(registry: Any) -> None:
    # the demo fleet's real git and memory tools (manifests/demo.yaml): "remember its hash in memory",
    # ranked alone, finds the memory server's reader and deleters first; the act it asks for is a write
    tools = demo_fleet()
    git = FakeBackend("git", [t for t in tools if t.source == "git"])
    memory = FakeBackend("memory", [t for t in tools if t.source == "memory"])
    gateway = make_gateway(registry, git, memory, relist_wait_ms=5000, relist_probe_ms=5000)
    async with relisting_gateway(gateway, "legacy") as (client, relister):
        request = "show me the last commit of this repository and remember its hash in memory"
        await client.call_tool("find_tools", {"query": request})
        before = names(await client.list_tools(cache_mode="bypass"))
        arguments = {"repo_path": "/repo", "max_count": 1}
        called = await client.call_tool("call_tool", {"name": "git__git_log", "arguments": arguments})
        assert not called.is_error
        added = [n for n in relister.lists[-1] if n not in before and n.startswith("memory__")]
    assert added, relister.lists[-1]
    assert tool_act(added[0]) == "write", added
    assert not [n for n in added if tool_act(n) == "delete"], added
