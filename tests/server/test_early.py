"""The early front (``server/fronts/early.py``): what it answers before the SDK is imported equals what the
SDK answers itself, for every protocol version of both eras; the SDK then continues the same session.

Real pipes, the real SDK server of a real ``Gateway`` (its registry cannot be opened here, so its tool
list is the meta-tools', as before any registry is open), the real stdio path (``_serve_stdio``).
"""

from __future__ import annotations

import json
import os
import select
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import anyio
import pytest
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS as SDK_HANDSHAKE_VERSIONS
from mcp_types.version import MODERN_PROTOCOL_VERSIONS as SDK_MODERN_VERSIONS

from toolweave.errors import RegistryError
from toolweave.registry import Registry
from toolweave.server.fronts import handshake
from toolweave.server.fronts.early import ARRIVED_META, EARLY_ID_PREFIX, ClientLeft, EarlyFront
from toolweave.server.fronts.handover import Era, Handover
from toolweave.server.fronts.transports import _serve_stdio
from toolweave.server.gateway import Gateway
from toolweave.settings import PublishSettings, Settings

pytestmark = pytest.mark.anyio

VERSIONS = [*SDK_HANDSHAKE_VERSIONS, "1999-01-01", "2026-07-28"]
"""Every version the SDK negotiates, one it does not know and one of the other era (both get the newest)."""


def request(rid: int | str, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
    return message if params is None else {**message, "params": params}


def initialize(version: str) -> dict[str, Any]:
    client = {"name": "early-test", "version": "1"}
    return request(1, "initialize", {"protocolVersion": version, "capabilities": {}, "clientInfo": client})


INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}

ENVELOPES = {
    # what Claude Code 2.1.332 sends on every request
    "claude-code": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {
            "name": "claude-code",
            "title": "Claude Code",
            "version": "2.1.332",
            "description": "Anthropic's agentic coding tool",
            "websiteUrl": "https://claude.com/claude-code",
        },
        "io.modelcontextprotocol/clientCapabilities": {"roots": {"listChanged": True}, "elicitation": {}},
    },
    # the bare minimum the SDK accepts
    "minimal": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    },
}
META = ENVELOPES["minimal"]


def modern(rid: int | str, method: str, meta: dict[str, Any] = META, **params: Any) -> dict[str, Any]:
    return request(rid, method, {"_meta": meta, **params})


def listen(rid: int | str, meta: dict[str, Any] = META) -> dict[str, Any]:
    return modern(rid, "subscriptions/listen", meta, notifications={"toolsListChanged": True})


def unopenable() -> Registry:
    raise RegistryError("not opened in this test")


def gateway(tmp_path: Path, *, always_load: bool = True) -> Gateway:
    settings = Settings(home=tmp_path / "registry", publish=PublishSettings(always_load=always_load))
    return Gateway(unopenable, [], settings)


@dataclass
class Client:
    """The client's ends of two pipes: what it writes is the server's stdin, it reads the server's stdout."""

    to_server: IO[bytes]
    from_server: IO[bytes]

    def send(self, *messages: dict[str, Any]) -> None:
        self.to_server.write(b"".join(json.dumps(m).encode() + b"\n" for m in messages))
        self.to_server.flush()

    async def receive(self) -> dict[str, Any]:
        with anyio.fail_after(60):
            line = await anyio.to_thread.run_sync(self.from_server.readline, abandon_on_cancel=True)
        assert line, "the server closed its output"
        message: dict[str, Any] = json.loads(line)
        return message

    async def receive_many(self, count: int) -> dict[str, dict[str, Any]]:
        """``count`` messages by id (a notification by its method): the SDK answers concurrently."""
        received: dict[str, dict[str, Any]] = {}
        for _ in range(count):
            message = await self.receive()
            received[str(message.get("id", message.get("method")))] = message
        return received


@dataclass
class Server:
    stdin_fd: int
    stdout_fd: int
    client_end: IO[bytes]
    """The client's end of the server's stdin: closing it ends the server's input."""


@contextmanager
def pipe_pair() -> Iterator[tuple[Client, Server]]:
    in_read, in_write = os.pipe()
    out_read, out_write = os.pipe()
    client = Client(os.fdopen(in_write, "wb"), os.fdopen(out_read, "rb"))
    try:
        yield client, Server(in_read, out_write, client.to_server)
    finally:
        client.to_server.close()
        client.from_server.close()
        os.close(in_read)
        os.close(out_write)


@pytest.fixture
def pipes() -> Iterator[tuple[Client, Server]]:
    with pipe_pair() as pair:
        yield pair


@asynccontextmanager
async def serving(gw: Gateway, server: Server, early: EarlyFront | None) -> AsyncIterator[None]:
    """``_serve_stdio`` on the server's pipe ends, as ``toolweave serve`` runs it. On the way out the
    client closes the server's stdin and the server ends by itself: nothing of it (a reader or writer
    thread) outlives the test to meet the next test's pipes under the same descriptor numbers."""
    stdin = os.fdopen(server.stdin_fd, "rb", closefd=False)
    stdout = os.fdopen(server.stdout_fd, "wb", closefd=False)
    ended = anyio.Event()

    async def serve() -> None:
        try:
            await _serve_stdio(gw, early, stdin=stdin, stdout=stdout)
        finally:
            ended.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(serve)
        yield
        server.client_end.close()
        with anyio.move_on_after(30):
            await ended.wait()
        tg.cancel_scope.cancel()


def front_replay(front: EarlyFront) -> list[bytes]:
    """What the front handed over, line by line (after ``hand_over``)."""
    return front._replay


@contextmanager
def front_on(server: Server, *, always_load: bool = True) -> Iterator[EarlyFront]:
    front = EarlyFront(server.stdin_fd, server.stdout_fd)
    front.offer_tools_list(always_load)
    front.start()
    yield front


async def answers(tmp_path: Path, messages: list[dict[str, Any]], count: int, *, early: bool) -> Any:
    """The ``count`` replies to ``messages``: from the SDK alone, or from an early front (then handed
    over, and with what it handed over)."""
    with pipe_pair() as (client, server):
        if not early:
            async with serving(gateway(tmp_path), server, None):
                client.send(*messages)
                return await client.receive_many(count)
        with front_on(server) as front:
            client.send(*messages)
            received = await client.receive_many(count)
            return received, await anyio.to_thread.run_sync(front.hand_over)


def test_the_protocol_versions_are_the_sdks() -> None:
    assert handshake.HANDSHAKE_PROTOCOL_VERSIONS == SDK_HANDSHAKE_VERSIONS
    assert handshake.MODERN_PROTOCOL_VERSIONS == SDK_MODERN_VERSIONS


@pytest.mark.parametrize("version", VERSIONS)
async def test_early_answers_equal_the_sdks_own(tmp_path: Path, version: str) -> None:
    messages = [initialize(version), INITIALIZED, request(2, "tools/list"), request(3, "ping")]
    sdk = await answers(tmp_path, messages, 3, early=False)
    assert sorted(sdk) == ["1", "2", "3"] and all("result" in m for m in sdk.values()), sdk
    early, handover = await answers(tmp_path, messages, 3, early=True)
    assert early == sdk
    assert [method for method, _ in handover.answered.values()] == ["initialize", "tools/list", "ping"]
    assert handover.era is Era.HANDSHAKE


@pytest.mark.parametrize("envelope", sorted(ENVELOPES))
async def test_early_answers_equal_the_sdks_own_in_the_2026_era(tmp_path: Path, envelope: str) -> None:
    """What Claude Code 2.1 sends first: ``server/discover``, then a listen stream, then the list."""
    meta = ENVELOPES[envelope]
    messages = [
        modern("probe", "server/discover", meta),
        listen("listen:0", meta),
        modern(1, "tools/list", meta),
        modern(2, "ping", meta),
    ]
    sdk = await answers(tmp_path, messages, 4, early=False)
    assert sorted(sdk) == ["1", "2", "notifications/subscriptions/acknowledged", "probe"], sdk
    assert sdk["2"]["error"]["code"] == -32601 and "result" in sdk["probe"] and "result" in sdk["1"]
    early, handover = await answers(tmp_path, messages, 4, early=True)
    assert early == sdk
    assert [method for method, _ in handover.answered.values()] == ["server/discover", "tools/list", "ping"]
    assert list(handover.listens) == ["listen:0"] and handover.era is Era.MODERN


@pytest.mark.parametrize("always_load", [True, False])
async def test_the_early_tool_list_is_the_gateways_before_its_registry_opens(
    tmp_path: Path, pipes: tuple[Client, Server], always_load: bool
) -> None:
    client, server = pipes
    async with serving(gateway(tmp_path, always_load=always_load), server, None):
        client.send(initialize("2025-11-25"), INITIALIZED, request(2, "tools/list"), modern(3, "tools/list"))
        await client.receive()
        listed = await client.receive()
    assert listed["result"] == handshake.tools_list_result(always_load)
    version = handshake.server_version()
    assert handshake.modern_tools_list_result(always_load, version)["tools"] == listed["result"]["tools"]


async def test_the_sdk_continues_the_session_the_front_began(
    tmp_path: Path, pipes: tuple[Client, Server]
) -> None:
    client, server = pipes
    front = EarlyFront(server.stdin_fd, server.stdout_fd)
    front.start()
    client.send(initialize("2024-11-05"), INITIALIZED, request(2, "tools/list"))
    assert (await client.receive())["result"]["protocolVersion"] == "2024-11-05"
    assert (await client.receive())["id"] == 2
    gw = gateway(tmp_path)
    async with serving(gw, server, front):
        client.send(request(3, "tools/call", {"name": "find_tools", "arguments": {"query": "time in Tokyo"}}))
        called = await client.receive()  # nothing in between: the SDK's own replies to 1 and 2 were dropped
        assert called["id"] == 3 and "result" in called, called
        assert "could not be opened" in called["result"]["content"][0]["text"]
        # The SDK's connection was set up by the replayed initialize (client, negotiated version), and
        # the replayed tools/list made the gateway's session.
        (session,) = list(gw.sessions)
        connection = session.connection
        assert connection.client_params.client_info.name == "early-test"
        assert connection.protocol_version == "2024-11-05"


async def test_the_sdk_serves_the_listen_stream_the_front_opened(
    tmp_path: Path, pipes: tuple[Client, Server]
) -> None:
    """The 2026 era: the stream the client opened (and the front acknowledged) carries the gateway's
    later notices, under the client's own subscription id; the SDK's second acknowledgement is dropped."""
    client, server = pipes
    front = EarlyFront(server.stdin_fd, server.stdout_fd)
    front.start()
    client.send(modern(0, "server/discover"), listen("listen:0"), modern(1, "tools/list"))
    early = await client.receive_many(3)
    assert sorted(early) == ["0", "1", "notifications/subscriptions/acknowledged"]
    gw = gateway(tmp_path)
    async with serving(gw, server, front):
        client.send(modern(2, "tools/call", name="find_tools", arguments={"query": "time in Tokyo"}))
        called = await client.receive()  # the SDK's replies to 0 and 1 and its acknowledgement: dropped
        assert called["id"] == 2 and "could not be opened" in called["result"]["content"][0]["text"]
        (session,) = list(gw.sessions)
        with anyio.fail_after(30):
            while gw.notifier.listening(session.key) == 0:  # the replayed listen reached the gateway
                await anyio.sleep(0.01)
        await gw.notifier.tools_changed(session)
        notice = await client.receive()
    assert notice == {
        "jsonrpc": "2.0",
        "method": "notifications/tools/list_changed",
        "params": {"_meta": {handshake.SUBSCRIPTION_ID_META: "listen:0"}},
    }


@pytest.mark.parametrize("era", ["handshake", "2026"])
async def test_a_list_that_changed_before_the_sdk_answered_it_is_announced(
    tmp_path: Path, pipes: tuple[Client, Server], era: str
) -> None:
    """The early list is the SDK's unless something changed in between (here: the loaded settings turn
    ``always_load`` off after the front answered with the default): then the client is told to list
    again, where it can hear it."""
    client, server = pipes
    front = EarlyFront(server.stdin_fd, server.stdout_fd)
    front.start()
    if era == "handshake":
        client.send(initialize("2025-11-25"), INITIALIZED, request(2, "tools/list"))
        expected: dict[str, Any] = {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
    else:
        client.send(modern(1, "server/discover"), listen("L"), modern(2, "tools/list"))
        expected = {**ENVELOPE_NOTICE, "params": {"_meta": {handshake.SUBSCRIPTION_ID_META: "L"}}}
    early = await client.receive_many(3 if era == "2026" else 2)
    assert early["2"]["result"]["tools"][0]["_meta"] == handshake.ALWAYS_LOAD  # the default
    async with serving(gateway(tmp_path, always_load=False), server, front):
        client.send(request(3, "ping") if era == "handshake" else modern(3, "tools/list"))
        replies = await client.receive_many(2)  # the SDK answers concurrently: in either order
    assert replies["notifications/tools/list_changed"] == expected
    assert "result" in replies["3"]


ENVELOPE_NOTICE = {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}


async def test_the_front_keeps_what_it_does_not_answer_and_goes_on(
    tmp_path: Path, pipes: tuple[Client, Server]
) -> None:
    """A call waits for the SDK; a list sent after it is still answered at once, and the SDK answers the
    call (once) when it takes over."""
    client, server = pipes
    front = EarlyFront(server.stdin_fd, server.stdout_fd)
    front.start()
    call: dict[str, Any] = {"name": "find_tools", "arguments": {"query": "time in Tokyo"}}
    client.send(
        modern(1, "server/discover"), modern(2, "tools/call", **call), modern(3, "tools/list"), {"bad": 1}
    )
    assert [(await client.receive())["id"] for _ in range(2)] == [1, 3]
    async with serving(gateway(tmp_path), server, front):
        replies = await client.receive_many(2)
    assert sorted(replies) == ["2", "None"]  # the call, and the SDK's error for the malformed line
    assert "could not be opened" in replies["2"]["result"]["content"][0]["text"]
    assert replies["None"]["error"]["code"] == -32600
    kept = [json.loads(line) for line in front_replay(front) if b"tools/call" in line]
    assert [m["params"]["_meta"][ARRIVED_META] > 0 for m in kept] == [True]  # when it came, for the bound


@pytest.mark.parametrize(
    "first",
    [
        request(1, "tools/list"),  # no era yet: the SDK decides what this is
        modern(1, "tools/call", name="find_tools", arguments={}),
        modern(1, "server/discover", {**META, "io.modelcontextprotocol/protocolVersion": "2030-01-01"}),
        request(1, "initialize", {"protocolVersion": "2025-11-25"}),  # no clientInfo: the SDK refuses it
    ],
)
async def test_a_first_message_the_front_does_not_answer_leaves_everything_to_the_sdk(
    tmp_path: Path, pipes: tuple[Client, Server], first: dict[str, Any]
) -> None:
    client, server = pipes
    front = EarlyFront(server.stdin_fd, server.stdout_fd)
    front.start()
    client.send(first, {**initialize("2025-11-25"), "id": 2})
    front._thread.join(30)  # it stops by itself at the first line it does not answer
    assert not front._thread.is_alive()
    assert front._pending.startswith(json.dumps(first).encode())  # unread: the SDK reads it first
    async with serving(gateway(tmp_path), server, front):
        replies = await client.receive_many(2)  # both from the SDK: the front answered nothing
    assert sorted(replies) == ["1", "2"]


def test_the_front_says_when_the_client_left_first() -> None:
    in_read, in_write = os.pipe()
    out_read, out_write = os.pipe()
    front = EarlyFront(in_read, out_write)
    front.start()
    os.write(in_write, json.dumps(initialize("2025-11-25")).encode() + b"\n")
    os.close(in_write)
    front._thread.join(30)
    try:
        assert front.left.is_set()
        handover = front.hand_over()
        assert [m for m, _ in handover.answered.values()] == ["initialize"]
    finally:
        for fd in (in_read, out_read, out_write):
            os.close(fd)


def test_what_the_client_leaving_calls_runs_only_while_armed() -> None:
    calls: list[str] = []
    left = ClientLeft()
    left.arm(lambda: calls.append("early"))
    left.arm(None)
    left.set()  # disarmed: nothing runs
    assert left.is_set() and calls == []
    left.arm(lambda: calls.append("late"))  # armed after the client left: it runs at once
    assert calls == ["late"]

    fresh = ClientLeft()
    fresh.arm(lambda: calls.append("at the end of input"))
    fresh.set()
    assert calls == ["late", "at the end of input"]


def test_the_front_calls_what_it_was_armed_with_when_stdin_ends() -> None:
    in_read, in_write = os.pipe()
    out_read, out_write = os.pipe()
    front = EarlyFront(in_read, out_write)
    called: list[bool] = []
    front.left.arm(lambda: called.append(front.left.is_set()))
    front.start()
    os.write(in_write, json.dumps(initialize("2025-11-25")).encode() + b"\n")
    os.close(in_write)
    front._thread.join(30)
    try:
        assert called == [True]
    finally:
        for fd in (in_read, out_read, out_write):
            os.close(fd)


PARTIAL = b'{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "par'


def test_a_line_split_across_reads_and_the_handover_keep_every_byte() -> None:
    """The front replays what it answered under private ids, then the rest verbatim, a partial line too."""
    in_read, in_write = os.pipe()
    out_read, out_write = os.pipe()
    front = EarlyFront(in_read, out_write)
    front.start()
    try:
        first = json.dumps(initialize("2025-11-25")).encode()
        os.write(in_write, first[:10])
        os.write(in_write, first[10:] + b"\n")
        with os.fdopen(out_read, "rb", closefd=False) as out:
            answer = json.loads(out.readline())
        assert answer["id"] == 1 and answer["result"]["serverInfo"]["name"] == "toolweave"
        os.write(in_write, PARTIAL)
        handover = front.hand_over()
        os.close(in_write)
        with os.fdopen(in_read, "rb", closefd=False) as pipe:
            unread = pipe.read()  # what the front had not read yet stays in the pipe for the SDK
    finally:
        for fd in (in_read, out_read, out_write):
            os.close(fd)
    replayed, rest = handover.prefix.split(b"\n", 1)
    assert json.loads(replayed) == {**initialize("2025-11-25"), "id": f"{EARLY_ID_PREFIX}0"}
    assert rest + unread == PARTIAL


def test_the_prefixed_reader_reads_the_prefix_then_the_stream(tmp_path: Path) -> None:
    rest = tmp_path / "rest"
    rest.write_bytes(b'rt"}\nnext\n')
    with rest.open("rb") as stream:
        reader = Handover(b"one\n" + b"x" * 10 + b'\n{"pa').reader(stream)
        assert reader.readline(100) == b"one\n"
        assert reader.readline(4) == b"xxxx"  # a limit cuts inside the prefix
        assert reader.readline(100) == b"xxxxxx\n"
        assert reader.readline(100) == b'{"part"}\n'  # the prefix ended inside this line
        assert reader.readline(100) == b"next\n"
        assert reader.readline(100) == b""


def test_the_process_front_binds_the_host_socket_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only the process's own front (``early.start``) binds it; it is removed when nothing will serve."""
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    in_read, in_write = os.pipe()
    out_read, out_write = os.pipe()
    try:
        plain = EarlyFront(in_read, out_write)
        plain.start()
        front = EarlyFront(in_read, out_write, host_channel=True)
        front.start()
        expected = tmp_path / "toolweave" / f"host-{os.getppid()}-{os.getpid()}.sock"
        deadline = time.monotonic() + 30
        while front.host_socket is None and time.monotonic() < deadline:
            time.sleep(0.01)
        assert front.host_socket is not None and plain.host_socket is None
        assert Path(front.host_socket.getsockname()) == expected and expected.is_socket()
        front.close_host_socket()
        assert not expected.exists()
    finally:
        os.close(in_write)
        for fd in (in_read, out_read, out_write):
            os.close(fd)


@pytest.mark.parametrize("wait_s", [0.2, 0.0])
def test_a_find_tools_the_sdk_has_not_taken_within_its_bound_is_answered_as_still_starting(
    wait_s: float,
) -> None:
    """No ready table, the SDK still importing (a busy machine: longer than a client's 5 s timeout): a
    plain find_tools is answered here as still starting after ``startup_call_wait_s``, and not replayed
    (nothing was searched); with 0 it waits for the SDK. Other calls always wait for the SDK."""
    from toolweave.server.fronts.early import STILL_STARTING

    in_read, in_write = os.pipe()
    out_read, out_write = os.pipe()
    front = EarlyFront(in_read, out_write)
    front.offer_starting_wait(wait_s)
    front.start()
    find: dict[str, Any] = {"name": "find_tools", "arguments": {"query": "time in Tokyo"}}
    call = {"name": "time__get_current_time", "arguments": {}}
    other: dict[str, Any] = {"name": "call_tool", "arguments": call}
    try:
        lines = [
            modern(1, "server/discover"),
            modern(2, "tools/call", **find),
            modern(3, "tools/call", **other),
        ]
        os.write(in_write, b"".join(json.dumps(m).encode() + b"\n" for m in lines))
        with os.fdopen(out_read, "rb", closefd=False) as out:
            assert json.loads(out.readline())["id"] == 1
            if wait_s:
                answer = json.loads(out.readline())
                assert answer["id"] == 2
                assert answer["result"]["structuredContent"]["note"] == STILL_STARTING
                assert answer["result"]["structuredContent"]["tools"] == []
            else:
                time.sleep(0.5)
        handover = front.hand_over()
    finally:
        for fd in (in_read, in_write, out_read, out_write):
            os.close(fd)
    kept = [json.loads(line)["id"] for line in handover.prefix.splitlines() if b"tools/call" in line]
    assert kept == ([3] if wait_s else [2, 3])


def test_the_still_starting_answer_finds_its_request_however_late_the_reader_runs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The bound's timer may fire before the reader thread, descheduled on a busy machine, has put the
    line it kept into the replay: the line joins it under the lock the timer takes, so the timer always
    finds it (before, it found nothing, and the find_tools waited for the SDK past the client's timeout).
    The reader is slowed here where it stamps the kept line."""
    from toolweave.server.fronts import early
    from toolweave.server.fronts.early import STILL_STARTING

    def slow_stamp(line: bytes, at: float | None = None) -> bytes:
        time.sleep(0.3)  # longer than the bound below
        return stamped(line, at)

    stamped = early.stamped
    monkeypatch.setattr(early, "stamped", slow_stamp)
    in_read, in_write = os.pipe()
    out_read, out_write = os.pipe()
    front = EarlyFront(in_read, out_write)
    front.offer_starting_wait(0.05)
    front.offer_ready_tools(None, 5)  # no table: the find is kept for the SDK
    front.start()
    find: dict[str, Any] = {"name": "find_tools", "arguments": {"query": "time in Tokyo"}}
    try:
        lines = [modern(1, "server/discover"), modern(2, "tools/call", **find)]
        os.write(in_write, b"".join(json.dumps(m).encode() + b"\n" for m in lines))
        with os.fdopen(out_read, "rb", closefd=False) as out:
            assert json.loads(out.readline())["id"] == 1
            readable, _, _ = select.select([out_read], [], [], 10)
            assert readable, "the find_tools was never answered as still starting"
            answer = json.loads(out.readline())
        assert answer["id"] == 2
        assert answer["result"]["structuredContent"]["note"] == STILL_STARTING
        front.hand_over()
    finally:
        for fd in (in_read, in_write, out_read, out_write):
            os.close(fd)


def test_the_fronts_still_starting_answer_is_the_gateways() -> None:
    from toolweave.server.fronts import early, front_answers
    from toolweave.server.turns import starting

    assert early.STILL_STARTING == starting.STILL_STARTING
    assert Settings().startup_call_wait_s == front_answers.DEFAULT_STARTING_WAIT_S
    assert front_answers.starting_wait("servers: {}\n", {}) == Settings().startup_call_wait_s
    assert front_answers.starting_wait("servers: {}\n", {"TOOLWEAVE_STARTUP_CALL_WAIT_S": "0"}) == 0
    assert front_answers.starting_wait("settings:\n  startup_call_wait_s: 9\n", {}) == 0  # the app's
