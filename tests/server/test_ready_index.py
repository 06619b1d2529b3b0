"""The ready table (``server/turns/ready_index.py``): what a starting gateway answers ``find_tools`` with, in
the stdio front before the SDK is imported, and in the gateway itself until its registry and embedding
model are up. Real registry and embedder, real MCP SDK client."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client as SdkClient

from tests.results import text
from toolweave.records import ToolRecord
from toolweave.registry import Registry
from toolweave.server.fronts.early import EARLY_ID_PREFIX, EarlyFront
from toolweave.server.fronts.handshake import listed_ready_tool
from toolweave.server.gateway import Gateway
from toolweave.server.turns import ready_index
from toolweave.server.turns.meta_tools import to_mcp_tool
from toolweave.server.turns.starting import answer_find_tools_while_starting, ready_table, starting
from toolweave.settings import Settings
from toolweave.wire_meta import SERVER_INFO_META_KEY

from .helpers import FakeBackend, call_held_by_start_up, notes_tools, time_tools
from .test_early import INITIALIZED, Client, Server, front_replay, initialize, listen, modern, request
from .test_early import pipes as pipes  # the fixture
from .test_startup import HeldBackend, held_opener

pytestmark = pytest.mark.anyio

QUERY = "what time is it in Tokyo"


def tool(tool_id: str, description: str, text: str) -> ready_index.ReadyTool:
    entry = {"name": tool_id, "description": description, "input_schema": {"type": "object"}}
    return ready_index.ReadyTool(tool_id, tool_id, entry, description, text)


TABLE = [
    tool("time__get_current_time", "Get current time", "get current time: Get current time in a timezone"),
    tool("time__convert_time", "Convert time", "convert time: Convert time between timezones"),
    tool("notes__create_note", "Create a note", "create note: Create a note with a title and body"),
]


FLEET = [
    *TABLE,
    tool("calendar__list_events", "List events", "list events: List the calendar's events at a given time"),
    tool("mail__send_email", "Send an email", "send email: Send an email to a recipient"),
]


def test_bm25_ranks_the_table_and_publishes_only_the_clear_hits() -> None:
    index = ready_index.ReadyIndex(FLEET)
    hits = index.search("what is the current time in Tokyo", 10)
    assert hits[0][0].id == "time__get_current_time"
    assert all(t.id != "notes__create_note" for t, _ in hits)  # shares no word with the query
    doc, ids = index.answer("current time", 10)
    assert ids == ["time__get_current_time"]  # the others share only "time": named, not published
    assert set(doc["also_found"]) == {"time__convert_time", "calendar__list_events"}
    assert doc["tools"][0]["name"] == "time__get_current_time" and doc["tool_list_changed"] is False
    nothing, none = index.answer("zebra", 10)
    assert nothing["tools"] == [] and none == [] and "note" in nothing


def test_a_table_too_small_for_a_floor_publishes_every_hit() -> None:
    # two time tools, and only convert_time's text says "Tokyo": BM25 scores the time tool far below
    # it, yet the gateway (no floor under five candidates) publishes both, and so must the table
    index = ready_index.ReadyIndex(
        [
            tool(
                "time__get_current_time",
                "Get current time",
                "get current time: Get current time in a timezone",
            ),
            tool("time__convert_time", "Convert time", "convert time: Convert time, e.g. to 'Asia/Tokyo'"),
        ]
    )
    scores = dict((t.id, s) for t, s in index.search(QUERY, 10))
    assert scores["time__get_current_time"] < ready_index.PUBLISH_SHARE * scores["time__convert_time"]
    _, ids = index.answer(QUERY, 10)
    assert ids == ["time__convert_time", "time__get_current_time"]


def test_the_tables_small_fleet_is_the_floors() -> None:
    from toolweave.retrieval.floor import MIN_CANDIDATES

    assert ready_index.SMALL_FLEET == MIN_CANDIDATES


def test_the_table_is_rewritten_only_when_it_changed(tmp_path: Path) -> None:
    assert ready_index.write(tmp_path, TABLE)
    stamp = (tmp_path / ready_index.READY_FILE).stat().st_mtime_ns
    assert not ready_index.write(tmp_path, TABLE)
    assert (tmp_path / ready_index.READY_FILE).stat().st_mtime_ns == stamp
    assert ready_index.write(tmp_path, TABLE[:2])
    loaded = ready_index.load(tmp_path)
    assert loaded is not None and [t.id for t in loaded.tools] == [t.id for t in TABLE[:2]]
    assert ready_index.ready_path("s3://bucket/registry") is None
    (tmp_path / ready_index.READY_FILE).write_text("{not json")
    assert ready_index.load(tmp_path) is None  # unreadable: the gateway answers as without one


def test_only_a_plain_find_tools_is_answered_from_the_table() -> None:
    plain = ready_index.plain_find_query
    assert plain({"name": "find_tools", "arguments": {"query": "  time  "}}) == ("time", None)
    assert plain({"name": "find_tools", "arguments": {"query": "time", "k": 3}}) == ("time", 3)
    assert plain({"name": "find_tools", "arguments": {"query": "time", "detail": True}}) is None
    assert plain({"name": "find_tools", "arguments": {"query": " "}}) is None
    assert plain({"name": "find_tools", "arguments": {"query": "time", "k": 0}}) is None
    # a k written as text is read as the gateway reads it: the first answer still comes from the table
    assert plain({"name": "find_tools", "arguments": {"query": "time", "k": " 3 "}}) == ("time", 3)
    assert plain({"name": "find_tools", "arguments": {"query": "time", "k": "three"}}) is None
    assert plain({"name": "find_tools", "arguments": {"query": "time", "k": "99"}}) is None
    assert plain({"name": "call_tool", "arguments": {"name": "x"}}) is None


async def test_the_stdio_front_answers_find_tools_from_the_table_and_hands_it_over(
    tmp_path: Path, pipes: tuple[Client, Server]
) -> None:
    client, server = pipes
    ready_index.write(tmp_path, TABLE)
    front = EarlyFront(server.stdin_fd, server.stdout_fd)
    front.start()
    client.send(
        initialize("2025-11-25"),
        request(2, "tools/call", {"name": "find_tools", "arguments": {"query": QUERY}}),
    )
    assert (await client.receive())["id"] == 1
    front.offer_ready_tools(str(tmp_path), 10)  # the settings name the registry: the find waited for it
    assert await client.receive() == LIST_CHANGED  # it offers tools: announced first, then answered
    found = await client.receive()
    assert found["id"] == 2
    structured = found["result"]["structuredContent"]
    assert structured["tools"][0]["name"] == "time__get_current_time"
    assert json.loads(found["result"]["content"][0]["text"]) == structured
    assert "still starting" not in json.dumps(found)
    client.send(modern(3, "tools/call", name="find_tools", arguments={"query": QUERY}))
    replay = await anyio.to_thread.run_sync(front.hand_over)
    # answered, and replayed under a private id: the gateway publishes what was found
    replayed = [json.loads(line) for line in replay.prefix.splitlines()]
    assert [m["id"] for m in replayed[:2]] == [f"{EARLY_ID_PREFIX}0", f"{EARLY_ID_PREFIX}1"]
    assert replayed[1]["params"]["arguments"] == {"query": QUERY}
    assert replay.answered[f"{EARLY_ID_PREFIX}1"][0] == "tools/call"
    assert front_replay(front)  # the enveloped call of another era: kept for the SDK, not answered here


async def test_without_a_table_the_front_leaves_find_tools_to_the_sdk(
    tmp_path: Path, pipes: tuple[Client, Server]
) -> None:
    client, server = pipes
    front = EarlyFront(server.stdin_fd, server.stdout_fd)
    front.offer_ready_tools(str(tmp_path), 10)
    front.start()
    client.send(
        initialize("2025-11-25"),
        request(2, "tools/call", {"name": "find_tools", "arguments": {"query": QUERY}}),
    )
    assert (await client.receive())["id"] == 1
    await anyio.sleep(0.2)
    replay = await anyio.to_thread.run_sync(front.hand_over)
    last = json.loads(replay.prefix.splitlines()[-1])
    assert last["id"] == 2  # verbatim: the SDK answers it


async def warm_table(registry: Registry, clock_tools: list[ToolRecord] | None = None) -> None:
    """A gateway served ``registry`` before: it left its ready table (as ``keep_ready_table`` does)."""
    clock, notes = FakeBackend("clock", clock_tools or time_tools()), FakeBackend("notes", notes_tools())
    gateway = Gateway(registry, [clock, notes], Settings(home=registry.path))
    async with SdkClient(gateway.server) as client:
        await client.call_tool("find_tools", {"query": QUERY})
        with anyio.fail_after(60):
            await gateway.warmed.wait()
            # every source ingested: a busy machine may answer the find before the last one is
            while {t.source for t in registry.tools()} != {"clock", "notes"}:
                await anyio.sleep(0.05)
        ready_index.write(registry.path, ready_table(gateway))  # unless keep_ready_table did already
        assert ready_index.load(registry.path) is not None


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_starting_gateway_answers_from_the_table_and_publishes(registry: Registry, mode: str) -> None:
    await warm_table(registry)
    opened = threading.Event()
    clock = HeldBackend("clock", time_tools())  # its upstream has not connected either
    settings = Settings(home=registry.path, connect_timeout_s=60)
    gateway = Gateway(held_opener(registry, opened), [clock, FakeBackend("notes", notes_tools())], settings)
    answer_find_tools_while_starting(gateway)
    try:
        async with SdkClient(gateway.server, mode=mode) as client:
            assert starting(gateway)
            began = time.monotonic()
            found = await client.call_tool("find_tools", {"query": QUERY})
            assert time.monotonic() - began < 5  # answered without the registry (it never opened)
            assert not found.is_error and found.structured_content is not None, text(found)
            names = [t["name"] for t in found.structured_content["tools"]]
            assert names[0] == "clock__get_current_time", found.structured_content
            assert "note" not in found.structured_content
            assert found.structured_content["tool_list_changed"] is True
            listed = await client.list_tools(cache_mode="bypass")
            assert "clock__get_current_time" in [t.name for t in listed.tools]  # published from the table
            # its call waits for the registry and its upstream, then runs
            called = await call_held_by_start_up(client, 0.5, opened.set, clock.connect.set)
            assert not called.is_error, text(called)
            assert clock.calls == [("get_current_time", {"timezone": "Asia/Tokyo"})]
            listed = await client.list_tools(cache_mode="bypass")
            assert "clock__get_current_time" in [t.name for t in listed.tools]  # still published
    finally:
        opened.set()
        clock.connect.set()


async def test_a_tool_published_from_the_table_is_defined_as_the_registry_defines_it(
    registry: Registry,
) -> None:
    """Its title, output schema and annotations too, not only its entry: a client keeps the definition
    it listed while the registry opened (until the next ``list_changed``), for the whole session."""
    plain, other = time_tools()
    annotations = {**plain.backend, "annotations": {"read_only_hint": True, "open_world_hint": False}}
    described = plain.model_copy(
        update={
            "title": "Current time",
            "output_schema": {"type": "object", "properties": {"datetime": {"type": "string"}}},
            "backend": annotations,
        }
    )
    await warm_table(registry, [described, other])
    table = ready_index.load(registry.path)
    assert table is not None
    defined = to_mcp_tool(described).model_dump(include={"title", "output_schema", "annotations"})
    assert defined["annotations"] == {"read_only_hint": True, "open_world_hint": False} | {
        k: None for k in ("title", "destructive_hint", "idempotent_hint")
    }
    # the fronts' own listing (stdio, HTTP): the wire's shape
    row = next(t for t in table.tools if t.id == described.id)
    wire = listed_ready_tool(row.entry, False, table.listed(described.id))
    assert wire["annotations"] == {"readOnlyHint": True, "openWorldHint": False}
    assert types.Tool.model_validate(wire).model_dump(include=set(defined)) == defined
    # the gateway's, while its registry opens
    opened = threading.Event()
    settings = Settings(home=registry.path, connect_timeout_s=60)
    gateway = Gateway(held_opener(registry, opened), [FakeBackend("clock", [described, other])], settings)
    answer_find_tools_while_starting(gateway)
    try:
        async with SdkClient(gateway.server, mode="legacy") as client:
            assert starting(gateway)
            found = await client.call_tool("find_tools", {"query": QUERY})
            assert found.structured_content is not None, text(found)
            assert found.structured_content["tools"][0]["name"] == described.id
            listed = {t.name: t for t in (await client.list_tools(cache_mode="bypass")).tools}
            assert starting(gateway)  # still from the table
            assert listed[described.id].model_dump(include=set(defined)) == defined
    finally:
        opened.set()


async def test_the_gateway_leaves_its_table_once_warm(registry: Registry) -> None:
    path = ready_index.ready_path(registry.path)
    assert path is not None and not path.exists()
    gateway = Gateway(registry, [FakeBackend("clock", time_tools())], Settings(home=registry.path))
    async with SdkClient(gateway.server) as client:
        await client.call_tool("find_tools", {"query": QUERY})
        with anyio.fail_after(60):
            while not path.exists():
                await anyio.sleep(0.05)
    table: dict[str, Any] = json.loads(path.read_text())
    assert "clock__get_current_time" in {row["id"] for row in table["tools"]}
    assert any("Examples" in row["text"] or "time" in row["text"] for row in table["tools"])


async def test_a_host_turn_while_starting_is_answered_from_the_table(registry: Registry) -> None:
    """The prompt hook's turn (``server/fronts/host.py``) reaches a gateway whose registry is not open: the
    table answers it within the hook's short budget, and the client's next list carries the tool."""
    from toolweave.server.fronts.host import answer_turn

    await warm_table(registry)
    opened = threading.Event()
    settings = Settings(home=registry.path, connect_timeout_s=60)
    gateway = Gateway(held_opener(registry, opened), [FakeBackend("clock", time_tools())], settings)
    try:
        async with SdkClient(gateway.server, mode="legacy") as client:
            await client.list_tools(cache_mode="bypass")  # the client's session exists
            with anyio.fail_after(30):  # the registry never opens meanwhile
                answer = await answer_turn(gateway, {"turn": QUERY}, own_host=True)
            assert answer["ok"], answer
            (report,) = answer["sessions"]
            assert report["found"][0] == "clock__get_current_time" and report["tool_list_changed"]
            listed = await client.list_tools(cache_mode="bypass")
            assert "clock__get_current_time" in [t.name for t in listed.tools]
    finally:
        opened.set()


def test_the_http_front_answers_a_plain_find_tools_from_the_table_in_both_eras() -> None:
    """``front_answers.decide`` (pure): with the table offered, a plain ``find_tools`` is answered and
    replayed (the gateway publishes); without it, or for a call of another tool, the gateway answers."""
    import dataclasses

    from toolweave.server.fronts.front_answers import decide

    from .test_front_answers import modern as modern_request
    from .test_front_answers import policy, scope

    ready = dataclasses.replace(policy(), ready=ready_index.ReadyIndex(TABLE))
    session = (b"mcp-session-id", b"front-session")
    call = {"name": "find_tools", "arguments": {"query": QUERY}}
    body = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call}).encode()
    answered = decide(scope(session), body, ready, {"front-session"})
    assert answered is not None and answered.replay and answered.reply is not None
    assert answered.reply["result"]["structuredContent"]["tools"][0]["name"] == "time__get_current_time"
    assert decide(scope(session), body, policy(), {"front-session"}) is None  # no table offered
    other = json.dumps({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "x"}}).encode()
    assert decide(scope(session), other, ready, {"front-session"}) is None
    headers, modern_body = modern_request("tools/call", 4, **call)
    headers["headers"].append((b"mcp-name", b"find_tools"))
    answered = decide(headers, modern_body, ready, set())
    assert answered is not None and answered.reply is not None
    result = answered.reply["result"]
    assert result["resultType"] == "complete" and SERVER_INFO_META_KEY in result["_meta"]
    assert result["structuredContent"]["tools"][0]["name"] == "time__get_current_time"


def test_the_command_lines_registry_is_known_before_the_settings() -> None:
    """``--registry`` wins over the manifest and the environment: the stdio front may answer from that
    registry's table before the settings are loaded (``toolweave.__main__``)."""
    from toolweave.__main__ import registry_option

    assert registry_option(["serve", "-m", "m.yaml", "--registry", "/r"]) == "/r"
    assert registry_option(["serve", "--registry=/r", "-m", "m.yaml"]) == "/r"
    assert registry_option(["serve", "-m", "m.yaml"]) is None
    assert registry_option(["ingest", "--registry", "/r"]) is None


async def test_the_gateway_publishes_what_the_stdio_front_answered(
    registry: Registry, pipes: tuple[Client, Server]
) -> None:
    """The front shows what its answer offered at once (``list_changed``, then ``tools/list`` with the
    tool) before the SDK is loaded; its answers are replayed into the gateway: the SDK's own replies are
    dropped (the client got one answer), the gateway publishes what it found and says so, and the list
    still carries the tool, all while the registry is still not open."""
    from .test_early import serving

    await warm_table(registry)
    client, server = pipes
    front = EarlyFront(server.stdin_fd, server.stdout_fd)
    front.offer_ready_tools(str(registry.path), 10)
    front.start()
    find = {"name": "find_tools", "arguments": {"query": QUERY}}
    front.offer_relist_bounds(60, 60)  # held until the client re-lists, however slow this machine is
    client.send(
        initialize("2025-11-25"), INITIALIZED, request(2, "tools/list"), request(3, "tools/call", find)
    )
    assert (await client.receive())["id"] == 1
    assert [t["name"] for t in (await client.receive())["result"]["tools"]] == ["find_tools", "call_tool"]
    # from the front (the SDK is not loaded yet): the notice first, the answer once the client re-listed
    assert await client.receive() == LIST_CHANGED
    client.send(request(4, "tools/list"))
    listed = await client.receive()
    assert listed["id"] == 4 and "clock__get_current_time" in [t["name"] for t in listed["result"]["tools"]]
    found_reply = await client.receive()
    assert found_reply["id"] == 3
    found = found_reply["result"]["structuredContent"]
    assert found["tools"][0]["name"] == "clock__get_current_time" and found["tool_list_changed"] is True
    client.send(request(5, "tools/call", find))  # the same tools again: nothing new to announce
    assert (await client.receive())["result"]["structuredContent"]["tool_list_changed"] is False
    opened = threading.Event()
    settings = Settings(home=registry.path, connect_timeout_s=60)
    gw = Gateway(held_opener(registry, opened), [FakeBackend("clock", time_tools())], settings)
    answer_find_tools_while_starting(gw)
    try:
        async with serving(gw, server, front):
            notice = await client.receive()  # nothing before it: the SDK's replies were dropped
            assert notice == LIST_CHANGED, notice
            client.send(request(6, "tools/list"))
            listed = await client.receive()
            while "id" not in listed:  # the gateway's other notices (the replayed calls published)
                listed = await client.receive()
            assert listed["id"] == 6
            assert "clock__get_current_time" in [t["name"] for t in listed["result"]["tools"]]
            assert not gw.served.ready.is_set()
    finally:
        opened.set()


LIST_CHANGED = {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}


async def test_in_the_2026_era_the_front_announces_its_offer_on_the_listen_stream(
    registry: Registry, pipes: tuple[Client, Server]
) -> None:
    """A 2026-era client hears changes only on its listen streams: the front's notice goes there."""
    await warm_table(registry)
    client, server = pipes
    front = EarlyFront(server.stdin_fd, server.stdout_fd)
    front.offer_ready_tools(str(registry.path), 10)
    front.start()
    find: dict[str, Any] = {"name": "find_tools", "arguments": {"query": QUERY}}
    client.send(modern(1, "server/discover"), listen("listen-1"), modern(2, "tools/call", **find))
    assert (await client.receive())["id"] == 1
    assert (await client.receive())["method"] == "notifications/subscriptions/acknowledged"
    # the notice first; the answer is held until the client has listed the tools it offers (Claude Code
    # sends its next model request as soon as it has the answer, with the list it has then)
    notice = await client.receive()
    assert notice == {
        "jsonrpc": "2.0",
        "method": "notifications/tools/list_changed",
        "params": {"_meta": {"io.modelcontextprotocol/subscriptionId": "listen-1"}},
    }
    client.send(modern(3, "tools/list"))
    listed = await client.receive()
    assert listed["id"] == 3
    names = [t["name"] for t in listed["result"]["tools"]]
    assert names[:2] == ["find_tools", "call_tool"] and "clock__get_current_time" in names[2:]
    found = await client.receive()
    assert found["id"] == 2 and found["result"]["structuredContent"]["tool_list_changed"] is True
    await anyio.to_thread.run_sync(front.hand_over)


async def test_a_held_answer_is_written_when_its_bound_passes_or_at_the_hand_over(
    registry: Registry, pipes: tuple[Client, Server]
) -> None:
    """A client that does not re-list still gets its answer: after the bound, or when the SDK takes
    over, whichever comes first; and one the front holds no more once it is handed over."""
    await warm_table(registry)
    client, server = pipes
    front = EarlyFront(server.stdin_fd, server.stdout_fd)
    front.offer_ready_tools(str(registry.path), 10)
    front.offer_relist_bounds(0.05, 0.05)
    front.start()
    find: dict[str, Any] = {"name": "find_tools", "arguments": {"query": QUERY}}
    client.send(initialize("2025-11-25"), INITIALIZED, request(2, "tools/call", find))
    assert (await client.receive())["id"] == 1
    assert await client.receive() == LIST_CHANGED
    assert (await client.receive())["id"] == 2  # the bound passed: no re-list came

    front.offer_relist_bounds(600, 600)
    other: dict[str, Any] = {"name": "find_tools", "arguments": {"query": "create a note with a title"}}
    client.send(request(3, "tools/call", other))
    assert await client.receive() == LIST_CHANGED
    handover = await anyio.to_thread.run_sync(front.hand_over)
    found = await client.receive()
    assert found["id"] == 3 and found["result"]["structuredContent"]["tool_list_changed"] is True
    assert handover.answered  # the SDK drops its own replies to what the front answered


async def test_a_client_that_closed_stdin_gets_its_held_answer_at_once(
    registry: Registry, pipes: tuple[Client, Server]
) -> None:
    """Nobody is left to re-list once stdin ended: the held answer goes out then, not at its bound; and
    what the front left for the SDK is what the client is still owed (``commands/serve.py`` keeps the
    launch going for it)."""
    await warm_table(registry)
    client, server = pipes
    front = EarlyFront(server.stdin_fd, server.stdout_fd)
    front.offer_ready_tools(str(registry.path), 10)
    front.offer_relist_bounds(600, 600)
    front.start()
    find: dict[str, Any] = {"name": "find_tools", "arguments": {"query": QUERY}}
    call = {"name": "call_tool", "arguments": {"name": "clock__get_current_time", "arguments": {}}}
    client.send(
        initialize("2025-11-25"), INITIALIZED, request(2, "tools/call", find), request(3, "tools/call", call)
    )
    assert (await client.receive())["id"] == 1
    assert await client.receive() == LIST_CHANGED
    server.client_end.close()
    found = await client.receive()  # within the receive's own bound, far below the hold's 600 s
    assert found["id"] == 2 and found["result"]["structuredContent"]["tools"]
    await anyio.to_thread.run_sync(front._thread.join, 30)
    assert front.left.is_set()
    assert front.owed() == 1  # the call_tool; the find_tools was answered here
    await anyio.to_thread.run_sync(front.hand_over)


async def test_with_authentication_the_table_answers_nobody(registry: Registry) -> None:
    """The table is the default identity's view: where clients authenticate as other identities (an
    identity's policy may hide tools), a starting gateway does not answer from it; where the only token
    is the default identity's (a shared gateway, ``server/fronts/sharing.py``), it does."""
    from toolweave.server.turns.starting import _table
    from toolweave.settings import SecuritySettings

    await warm_table(registry)
    opened = threading.Event()
    security = SecuritySettings(auth="tokens", tokens={"alice": "sha256:" + "0" * 64})
    # a shared gateway's one token, named as the default identity: every client is that identity
    shared = SecuritySettings(auth="tokens", tokens={"local": "sha256:" + "0" * 64})
    both = SecuritySettings(
        auth="tokens", tokens={"local": "sha256:" + "0" * 64, "alice": "sha256:" + "1" * 64}
    )
    for settings, answers in (
        (Settings(home=registry.path), True),
        (Settings(home=registry.path, security=security), False),
        (Settings(home=registry.path, security=shared), True),
        (Settings(home=registry.path, security=both), False),
    ):
        gateway = Gateway(held_opener(registry, opened), [], settings)
        assert (await _table(gateway) is not None) is answers
    opened.set()


def test_the_http_front_answers_before_the_settings_only_when_they_cannot_differ() -> None:
    """``front_answers.provisional_policy``: the defaults' answers, before typer and the settings model
    load, only on loopback with no security or publish setting in the manifest or the environment."""
    from toolweave.server.fronts.front_answers import provisional_policy

    plain = "servers:\n  time:\n    command: python\n"
    policy = provisional_policy("127.0.0.1", plain, {}, None)
    assert policy is not None and policy.always_load and "127.0.0.1:*" in policy.hosts
    assert provisional_policy("0.0.0.0", plain, {}, None) is None  # off loopback: auth is decided later
    assert provisional_policy("127.0.0.1", plain + "security:\n  auth: tokens\n", {}, None) is None
    assert provisional_policy("127.0.0.1", plain + "publish:\n  always_load: false\n", {}, None) is None
    assert provisional_policy("127.0.0.1", plain + "publish:\n  max_tools: 20\n", {}, None) is not None
    assert provisional_policy("127.0.0.1", "{servers: {}, security: {auth: tokens}}", {}, None) is None
    assert provisional_policy("127.0.0.1", plain, {"TOOLWEAVE_SECURITY__AUTH": "oauth"}, None) is None
    assert provisional_policy("127.0.0.1", plain, {"TOOLWEAVE_PUBLISH__ALWAYS_LOAD": "0"}, None) is None


async def test_a_hosts_turn_is_answered_by_the_front_once_the_client_re_listed(
    registry: Registry, pipes: tuple[Client, Server]
) -> None:
    """Claude Code's prompt hook gives up after 2 s, and a busy machine loads the MCP SDK slower than
    that: the front answers the turn from the ready table itself. The client hears ``list_changed`` on its
    listen stream, its next list carries the tool, the hook's answer comes after that list, and the turn
    is replayed into the gateway (a ``find_tools`` under the client's envelope: it publishes the same)."""
    from toolweave.server.fronts.host import send_turn

    await warm_table(registry)
    client, server = pipes
    front = EarlyFront(server.stdin_fd, server.stdout_fd, host_channel=True)
    front.offer_ready_tools(str(registry.path), 10)
    front.start()
    try:
        client.send(modern(1, "server/discover"), listen("listen-1"))
        assert (await client.receive())["id"] == 1
        assert (await client.receive())["method"] == "notifications/subscriptions/acknowledged"
        assert front.host_socket is not None
        path = Path(front.host_socket.getsockname())
        answers: list[dict[str, Any]] = []
        hook = threading.Thread(target=lambda: answers.append(send_turn(path, QUERY, timeout_s=60)))
        hook.start()
        notice = await client.receive()
        assert notice["method"] == "notifications/tools/list_changed"
        hook.join(0.5)
        assert not answers  # held until the client has the tools
        client.send(modern(2, "tools/list"))
        listed = await client.receive()
        assert "clock__get_current_time" in [t["name"] for t in listed["result"]["tools"]]
        await anyio.to_thread.run_sync(hook.join, 60)
        assert answers[0]["ok"] is True
        assert answers[0]["sessions"][0]["found"][0] == "clock__get_current_time"
        assert answers[0]["sessions"][0]["tool_list_changed"] is True
        replay = await anyio.to_thread.run_sync(front.hand_over)
        turn = json.loads(replay.prefix.splitlines()[2])  # after the discover and the listen
        assert turn["id"].startswith(EARLY_ID_PREFIX) and turn["method"] == "tools/call"
        assert turn["params"]["arguments"] == {"query": QUERY} and "_meta" in turn["params"]
    finally:
        front.close_host_socket()
