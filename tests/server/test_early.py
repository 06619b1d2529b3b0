"""The early front (``server/early.py``): what it answers before the SDK is imported equals what the SDK
answers itself, for every handshake protocol version; the SDK then continues the same session.

Real pipes, the real SDK server of a real ``Gateway`` (its registry cannot be opened here, so its tool
list is the meta-tools', as before any registry is open), the real stdio path (``_serve_stdio``).
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import anyio
import pytest
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS as SDK_HANDSHAKE_VERSIONS

from toolweave.errors import RegistryError
from toolweave.registry import Registry
from toolweave.server import handshake
from toolweave.server.early import EARLY_ID_PREFIX, EarlyFront, Handover
from toolweave.server.gateway import Gateway
from toolweave.server.transports import _serve_stdio
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


@dataclass
class Server:
    stdin_fd: int
    stdout_fd: int


@contextmanager
def pipe_pair() -> Iterator[tuple[Client, Server]]:
    in_read, in_write = os.pipe()
    out_read, out_write = os.pipe()
    client = Client(os.fdopen(in_write, "wb"), os.fdopen(out_read, "rb"))
    try:
        yield client, Server(in_read, out_write)
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
    """``_serve_stdio`` on the server's pipe ends, as ``toolweave serve`` runs it."""
    stdin = os.fdopen(server.stdin_fd, "rb", closefd=False)
    stdout = os.fdopen(server.stdout_fd, "wb", closefd=False)
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: _serve_stdio(gw, early, stdin=stdin, stdout=stdout))
        yield
        tg.cancel_scope.cancel()


async def sdk_answers(tmp_path: Path, version: str) -> list[dict[str, Any]]:
    with pipe_pair() as (client, server):
        async with serving(gateway(tmp_path), server, None):
            client.send(initialize(version), INITIALIZED, request(2, "tools/list"))
            return [await client.receive(), await client.receive()]


def test_the_handshake_versions_are_the_sdks() -> None:
    assert handshake.HANDSHAKE_PROTOCOL_VERSIONS == SDK_HANDSHAKE_VERSIONS


@pytest.mark.parametrize("version", VERSIONS)
async def test_early_answers_equal_the_sdks_own(tmp_path: Path, version: str) -> None:
    sdk = await sdk_answers(tmp_path, version)
    assert [m["id"] for m in sdk] == [1, 2] and all("result" in m for m in sdk), sdk
    with pipe_pair() as (client, server):
        front = EarlyFront(server.stdin_fd, server.stdout_fd)
        front.start()
        front.offer_tools_list(handshake.tools_list_result(always_load=True))
        client.send(initialize(version), INITIALIZED, request(2, "tools/list"))
        early = [await client.receive(), await client.receive()]
        handover = await anyio.to_thread.run_sync(front.hand_over)
    assert early == sdk
    assert [method for method, _ in handover.answered.values()] == ["initialize", "tools/list"]


@pytest.mark.parametrize("always_load", [True, False])
async def test_the_early_tool_list_is_the_gateways_before_its_registry_opens(
    tmp_path: Path, pipes: tuple[Client, Server], always_load: bool
) -> None:
    client, server = pipes
    async with serving(gateway(tmp_path, always_load=always_load), server, None):
        client.send(initialize("2025-11-25"), INITIALIZED, request(2, "tools/list"))
        await client.receive()
        listed = await client.receive()
    assert listed["result"] == handshake.tools_list_result(always_load)


async def test_the_sdk_continues_the_session_the_front_began(
    tmp_path: Path, pipes: tuple[Client, Server]
) -> None:
    client, server = pipes
    front = EarlyFront(server.stdin_fd, server.stdout_fd)
    front.start()
    client.send(initialize("2024-11-05"), INITIALIZED, request(2, "tools/list"))
    assert (await client.receive())["result"]["protocolVersion"] == "2024-11-05"
    front.offer_tools_list(handshake.tools_list_result(always_load=True))  # the list waited for this
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


async def test_a_list_that_changed_before_the_sdk_answered_it_is_announced(
    tmp_path: Path, pipes: tuple[Client, Server]
) -> None:
    """The early list is the SDK's unless something changed in between (a host's turn was applied):
    then the client is told to list again."""
    client, server = pipes
    front = EarlyFront(server.stdin_fd, server.stdout_fd)
    front.start()
    front.offer_tools_list({"tools": []})  # differs from what the gateway lists
    client.send(initialize("2025-11-25"), INITIALIZED, request(2, "tools/list"))
    await client.receive()
    assert (await client.receive())["result"] == {"tools": []}
    async with serving(gateway(tmp_path), server, front):
        client.send(request(3, "ping"))
        notice = await client.receive()
        assert notice == {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
        assert (await client.receive())["id"] == 3


async def test_the_front_stops_at_what_it_does_not_answer(
    tmp_path: Path, pipes: tuple[Client, Server]
) -> None:
    """A 2026-era client starts with ``server/discover``: nothing is answered early (not even the
    ``initialize`` after it), and the SDK answers everything, in order."""
    client, server = pipes
    front = EarlyFront(server.stdin_fd, server.stdout_fd)
    front.start()
    front.offer_tools_list(handshake.tools_list_result(always_load=True))
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    discover = request(7, "server/discover", {"_meta": meta})
    client.send(discover, request(8, "tools/list", {"_meta": meta}))
    front._thread.join(30)  # it stops by itself at the first line it does not answer
    assert not front._thread.is_alive()
    async with serving(gateway(tmp_path), server, front):
        discovered = await client.receive()
        assert discovered["id"] == 7 and "2026-07-28" in json.dumps(discovered["result"]), discovered
        listed = await client.receive()
        assert listed["id"] == 8 and [t["name"] for t in listed["result"]["tools"]] == [
            "find_tools",
            "call_tool",
        ]


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
