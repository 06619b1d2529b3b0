"""The release rule of a held find_tools answer (server/turns/notify.py): released once a list reply holding
the tools it published was *written* to the client, not when the re-list request arrived nor after a fixed
wait; a re-list that lacks them does not release it; a client that cannot hear the notice, or did not
re-list after an earlier one, is not held at all. Our own logic with a stand-in connection; the real
clients are in tests/e2e/test_turnloop_e2e.py."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.shared._context_streams import create_context_streams
from mcp.shared.message import SessionMessage

from toolweave.server.sessions.session_book import Session
from toolweave.server.turns.notify import Notifier, WrittenReplies, reporting_written
from toolweave.server.turns.publishing import PublishedSet

pytestmark = pytest.mark.anyio

SAFETY_S = 30.0
"""Far longer than any test here runs: a hold that ends did not end by its bound."""


class Connection:
    """A handshake-era connection with a channel a notice can travel on."""

    has_standalone_channel = True

    def __init__(self) -> None:
        self.notices = 0

    async def send_tool_list_changed(self) -> None:
        self.notices += 1


def session_with(*tool_ids: str) -> Session:
    session = Session("conn-1", PublishedSet(10))
    session.connection = Connection()
    session.published.select(list(tool_ids), turn=1)
    return session


class Hold:
    """One held answer, run in the background: ``released`` once ``Notifier.hold`` returned."""

    def __init__(self, notifier: Notifier, session: Session, probe_s: float = SAFETY_S) -> None:
        self.notifier, self.session, self.probe_s = notifier, session, probe_s
        self.released = False

    async def run(self) -> None:
        await self.notifier.tools_changed(self.session)
        await self.notifier.hold(self.session, self.session.published.ids(), SAFETY_S, self.probe_s)
        self.released = True


def request(request_id: int) -> Any:
    """What the list handler reads of its request context."""
    return SimpleNamespace(request_id=request_id, request=None)


def list_request(notifier: Notifier, session: Session, replies: WrittenReplies, request_id: int) -> None:
    """What the gateway's tools/list handler does for a request read from ``replies``' wire (stdio)."""
    with replies.reporting():
        notifier.list_built(session, request(request_id), session.published.ids())


async def test_released_when_the_list_reply_is_written_not_when_it_is_built() -> None:
    notifier, session, replies = Notifier(), session_with("clock__now"), WrittenReplies()
    hold = Hold(notifier, session)
    async with anyio.create_task_group() as tg:
        tg.start_soon(hold.run)
        await anyio.wait_all_tasks_blocked()
        assert session.connection.notices == 1 and not hold.released
        list_request(notifier, session, replies, 7)  # the re-list arrived and its reply is built ...
        await anyio.wait_all_tasks_blocked()
        assert not hold.released  # ... but not written yet: the answer could overtake it
        replies.written(6)  # another reply on the same wire
        await anyio.wait_all_tasks_blocked()
        assert not hold.released
        replies.written(7)
        await anyio.wait_all_tasks_blocked()
        assert hold.released
    assert session.client_lists == {"clock__now"} and session.relists_on_notice is True


async def test_the_end_of_the_clients_input_releases_every_hold_and_holds_nothing_more() -> None:
    """A stdio client whose stdin ended can send no re-list: a held answer goes at once (not at its
    bound), and later answers, in this session or a new one, are not held."""
    notifier, session = Notifier(), session_with("clock__now")
    session.relists_on_notice = True  # known to re-list: held up to the long bound
    hold = Hold(notifier, session)
    async with anyio.create_task_group() as tg:
        tg.start_soon(hold.run)
        await anyio.wait_all_tasks_blocked()
        assert session.connection.notices == 1 and not hold.released
        notifier.input_ended([session])
        await anyio.wait_all_tasks_blocked()
        assert hold.released
    for later in (Hold(notifier, session), Hold(notifier, session_with("notes__add"))):
        with anyio.fail_after(SAFETY_S / 2):  # not held at all: returns at once
            await later.run()
        assert later.released


async def test_a_relist_that_lacks_the_tools_does_not_release() -> None:
    notifier, session, replies = Notifier(), session_with("clock__now"), WrittenReplies()
    list_request(notifier, session, replies, 1)  # a list built before the change ...
    session.published.select(["notes__add"], turn=2)
    hold = Hold(notifier, session)
    async with anyio.create_task_group() as tg:
        tg.start_soon(hold.run)
        await anyio.wait_all_tasks_blocked()
        replies.written(1)  # ... written after the notice: it lacks notes__add
        await anyio.wait_all_tasks_blocked()
        assert not hold.released and "notes__add" not in session.client_lists
        list_request(notifier, session, replies, 2)
        replies.written(2)
        await anyio.wait_all_tasks_blocked()
        assert hold.released and "notes__add" in session.client_lists


async def test_an_older_reply_written_late_does_not_take_back_a_newer_list() -> None:
    notifier, session, replies = Notifier(), session_with("clock__now"), WrittenReplies()
    list_request(notifier, session, replies, 1)
    await notifier.tools_changed(session)
    session.published.select(["notes__add"], turn=2)
    list_request(notifier, session, replies, 2)
    replies.written(2)
    replies.written(1)
    assert "notes__add" in session.client_lists and session.listed_notices == 1


async def test_a_tool_evicted_meanwhile_is_not_waited_for() -> None:
    notifier, replies = Notifier(), WrittenReplies()
    session = Session("conn-1", PublishedSet(1))
    session.connection = Connection()
    session.published.select(["clock__now"], turn=1)
    hold = Hold(notifier, session)
    async with anyio.create_task_group() as tg:
        tg.start_soon(hold.run)
        await anyio.wait_all_tasks_blocked()
        session.published.select(["notes__add"], turn=2)  # another turn replaced it before any re-list
        list_request(notifier, session, replies, 1)
        replies.written(1)
        await anyio.wait_all_tasks_blocked()
        assert hold.released


async def test_a_client_that_never_relists_is_held_once_then_never() -> None:
    notifier, session = Notifier(), session_with("clock__now")
    await notifier.tools_changed(session)
    assert await session.wait_listed(session.published.ids(), 0.01) is False  # the safety bound ran out
    assert session.relists_on_notice is False
    hold = Hold(notifier, session)
    async with anyio.create_task_group() as tg:
        tg.start_soon(hold.run)
        await anyio.wait_all_tasks_blocked()
        assert hold.released  # not held at all: nothing listed, and far within SAFETY_S
    # once it re-lists after a notice, its answers are held again, but only with the short probe: that
    # re-list came after the held answer had gone (a client that reads its answers before its notices
    # would otherwise wait out the long bound on every answer)
    replies = WrittenReplies()
    list_request(notifier, session, replies, 1)
    replies.written(1)
    assert session.relists_on_notice is None
    session.published.select(["notes__add"], turn=2)
    hold = Hold(notifier, session)
    async with anyio.create_task_group() as tg:
        tg.start_soon(hold.run)
        await anyio.wait_all_tasks_blocked()
        assert not hold.released
        list_request(notifier, session, replies, 2)
        replies.written(2)  # re-listed while an answer was held: now a client known to re-list
    assert hold.released and session.relists_on_notice is True


async def test_a_timeout_after_a_relist_that_answered_the_notice_keeps_holding() -> None:
    """The client re-listed after the notice, but the list lacked the tools (they changed again): it
    still is a client that re-lists."""
    notifier, session, replies = Notifier(), session_with("clock__now"), WrittenReplies()
    await notifier.tools_changed(session)
    list_request(notifier, session, replies, 1)
    replies.written(1)
    session.published.select(["notes__add"], turn=2)
    assert await session.wait_listed(session.published.ids(), 0.01) is False
    assert session.relists_on_notice is True


async def test_the_bound_is_short_until_the_client_is_known_to_relist() -> None:
    """A client not yet seen re-listing after a notice gets the short bound (``probe_s``); one that
    did, or that listens on a 2026-era stream, the long one."""
    notifier, replies = Notifier(), WrittenReplies()
    unknown = session_with("clock__now")
    await notifier.tools_changed(unknown)
    async with anyio.create_task_group() as tg:
        tg.start_soon(notifier.hold, unknown, unknown.published.ids(), SAFETY_S, 0.01)
    assert unknown.relists_on_notice is False  # the short bound ran out: no re-list came
    known = session_with("clock__now")
    await notifier.tools_changed(known)
    list_request(notifier, known, replies, 1)
    replies.written(1)
    assert known.relists_on_notice is True
    known.published.select(["notes__add"], turn=2)
    hold = Hold(notifier, known, probe_s=0.01)
    async with anyio.create_task_group() as tg:
        tg.start_soon(hold.run)
        await anyio.wait_all_tasks_blocked()
        assert not hold.released  # still held, although the hold's probe bound would be over
        await anyio.sleep(0.05)
        assert not hold.released
        list_request(notifier, known, replies, 2)
        replies.written(2)


async def test_no_hold_for_a_client_that_cannot_hear_the_notice() -> None:
    notifier, session = Notifier(), Session("http-x@local", PublishedSet(10))  # no connection, no stream
    session.published.select(["clock__now"], turn=1)
    hold = Hold(notifier, session)
    async with anyio.create_task_group() as tg:
        tg.start_soon(hold.run)
        await anyio.wait_all_tasks_blocked()
        assert hold.released
    assert session.relists_on_notice is None  # nothing learnt: it could not have re-listed


async def test_a_transport_that_cannot_tell_counts_the_reply_written_when_built() -> None:
    notifier, session = Notifier(), session_with("clock__now")
    hold = Hold(notifier, session)
    async with anyio.create_task_group() as tg:
        tg.start_soon(hold.run)
        await anyio.wait_all_tasks_blocked()
        notifier.list_built(session, request(3), session.published.ids())  # no WrittenReplies here
        assert session.client_lists == {"clock__now"} and session.list_settle_s > 0  # counted now
        with anyio.fail_after(10):  # released a moment later: the reply goes once its handler returned
            while not hold.released:
                await anyio.sleep(0.001)


def response(request_id: int) -> SessionMessage:
    return SessionMessage(types.JSONRPCResponse(jsonrpc="2.0", id=request_id, result={}))


async def test_the_pipe_reports_a_reply_once_its_writer_took_it() -> None:
    """stdio: a reply counts as written once the pipe's writer (a stream without buffer) took it, so that
    whatever is sent after it goes on the wire after it."""
    replies, written = WrittenReplies(), []
    replies.after(5, lambda: written.append(5))
    to_wire, wire = create_context_streams[SessionMessage](0)

    async def gateway_sends(write: Any) -> None:
        await write.send(SessionMessage(types.JSONRPCNotification(jsonrpc="2.0", method="x")))
        await write.send(response(5))

    async with (
        to_wire,
        wire,
        reporting_written(to_wire, replies) as write,
        anyio.create_task_group() as tg,
    ):
        tg.start_soon(gateway_sends, write)
        assert isinstance((await wire.receive()).message, types.JSONRPCNotification)
        await anyio.wait_all_tasks_blocked()
        assert written == []  # the reply waits for the writer
        reply = (await wire.receive()).message
        assert isinstance(reply, types.JSONRPCResponse | types.JSONRPCError) and reply.id == 5
        await anyio.wait_all_tasks_blocked()
        assert written == [5]


async def test_http_requests_report_their_replies_when_the_response_was_sent() -> None:
    """Streamable HTTP: the SDK's request handling returns once the response was sent; the replies its
    handlers built count as written then. The handler finds them through its request's ASGI scope."""
    from starlette.requests import Request
    from starlette.types import Message

    from toolweave.server.fronts.json_answers import ReportingWritten

    seen: list[str] = []

    async def sdk_handles(scope: Any, receive: Any, send: Any) -> None:
        replies = WrittenReplies.of(Request(scope))  # the SDK hands the handler a Request of this scope
        assert replies is not None
        replies.after(1, lambda: seen.append("written"))
        seen.append("response sent")

    async def receive() -> Message:
        return {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        pass

    await ReportingWritten(sdk_handles)({"type": "http"}, receive, send)
    assert seen == ["response sent", "written"]
    assert WrittenReplies.of(Request({"type": "http"})) is None


SLOW_LINK_S = 0.5
"""How long the test's link takes to carry a tools/list response body (a slow network, a busy client)."""


class SlowListReplies:
    """ASGI middleware: the body of every response to a ``tools/list`` POST goes out ``SLOW_LINK_S``
    late. ``sent`` records, in order, each tools/list or find_tools response body as it went out to
    the client. A held answer released before its list reply was sent would go out first."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.sent: list[tuple[str, bytes]] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        body = b""

        async def receiving() -> Any:
            nonlocal body
            message = await receive()
            body += message.get("body", b"")
            return message

        async def sending(message: Any) -> None:
            kind = "list" if b'"tools/list"' in body else "find" if b'"find_tools"' in body else None
            if message["type"] == "http.response.body" and kind is not None:
                if kind == "list":
                    await anyio.sleep(SLOW_LINK_S)
                await send(message)
                self.sent.append((kind, message.get("body", b"")))
                return
            await send(message)

        await self.app(scope, receiving, sending)


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_over_http_the_answer_waits_for_the_list_reply_to_be_sent(registry: Any, mode: str) -> None:
    """Real uvicorn, the real SDK client re-listing on every notice (both eras), a slow link for list
    replies: the find_tools answer that published a tool goes out after a list reply holding it.

    (What the client saw is recorded at the server's side: the Python SDK client lists the tools again
    by itself to check a result against its tool's output schema, which hides the order from a check
    of its own list.)"""
    from mcp import Client

    from tests.e2e.watch import Relister, relisting
    from tests.net import free_port
    from tests.server.helpers import NOTE_EDGE, FakeBackend, notes_tools, time_tools
    from tests.server.test_security_http import serving
    from toolweave.server.fronts.transports import http_app
    from toolweave.server.gateway import Gateway
    from toolweave.settings import PublishSettings, Settings

    backends = [FakeBackend("clock", time_tools()), FakeBackend("notes", notes_tools(), [NOTE_EDGE])]
    settings = Settings(
        home=registry.path,
        publish=PublishSettings(relist_wait_ms=20_000, relist_probe_ms=20_000),
        call_timeout_s=5,
    )
    gateway = Gateway(registry, backends, settings)
    port = free_port()
    relister = Relister()
    link = SlowListReplies(http_app(gateway, port=port))
    with serving(link, port, gateway):
        url = f"http://127.0.0.1:{port}/mcp"
        async with (
            Client(url, mode=mode, message_handler=relister.on_message) as client,
            relisting(client, relister),
        ):
            found = await client.call_tool("find_tools", {"query": "what time is it in Tokyo", "k": 2})
    assert found.structured_content is not None and found.structured_content["tool_list_changed"] is True
    answer = next(i for i, (kind, body) in enumerate(link.sent) if kind == "find" and b"clock__" in body)
    lists = [
        i for i, (kind, body) in enumerate(link.sent) if kind == "list" and b"clock__get_current" in body
    ]
    assert lists and lists[0] < answer, [(kind, len(body)) for kind, body in link.sent]
