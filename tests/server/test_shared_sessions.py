"""Session state in Redis: a real redis-server, two session stores standing for two replicas."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.redis_server import PASSWORD, RedisServer, running_redis
from tests.server.test_sessions import MODERN, connection, ctx
from toolweave.errors import ConfigError
from toolweave.server.sessions.session_book import SESSION_META_KEY, Session, SessionStore
from toolweave.server.sessions.shared import NAMESPACE, RedisSessions, display_url

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

TTL_S = 60.0


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    yield from running_redis(tmp_path)


@pytest.fixture
async def replica(redis_server: RedisServer) -> AsyncIterator[Callable[[], SessionStore]]:
    """Makes a replica's session store on the test's Redis; their connections are closed at the end."""
    opened: list[RedisSessions] = []

    def make() -> SessionStore:
        opened.append(RedisSessions(redis_server.url, TTL_S))
        return SessionStore(max_tools=5, pinned=(), shared=opened[-1])

    yield make
    for shared in opened:
        await shared.aclose()


def tab(name: str = "tab-1") -> Any:
    """A 2026-era HTTP request of a client that names its session in ``_meta``."""
    return ctx(MODERN, connection(client="vscode"), {SESSION_META_KEY: name}, "10.0.0.1")


def find_turn(session: Session, tools: list[str], text: str) -> None:
    """What a find_tools turn does to a session (TurnEngine.retrieve_turn without retrieval)."""
    session.published.select(tools, session.next_turn())
    session.add_turn(text)


async def eventually(condition: Callable[[], bool], timeout_s: float = 15.0) -> None:
    with anyio.fail_after(timeout_s):
        while not condition():
            await anyio.sleep(0.02)


def test_logged_url_has_no_credentials() -> None:
    assert display_url("redis://user:pw@cache.internal:6380/2?password=x") == "redis://cache.internal:6380/2"
    assert display_url("rediss://:pw@10.0.0.5/0") == "rediss://10.0.0.5/0"


def test_a_url_that_is_not_redis_stops_the_start_without_showing_its_password() -> None:
    with pytest.raises(ConfigError, match="redis://") as raised:
        RedisSessions("http://:hunter2@cache.internal:6379/0", TTL_S)
    assert "hunter2" not in str(raised.value)
    assert "cache.internal" in str(raised.value)


async def test_set_and_context_published_on_one_replica_are_served_by_another(
    redis_server: RedisServer,
    replica: Callable[[], SessionStore],
) -> None:
    a, b = replica(), replica()
    session = await a.for_request(tab())
    find_turn(session, ["time__get_current_time", "time__convert_time"], "what time is it in Tokyo")
    await a.commit(session)

    elsewhere = await b.for_request(tab())
    assert elsewhere.published.ids() == ["time__get_current_time", "time__convert_time"]
    assert elsewhere.context() == ["what time is it in Tokyo"]
    assert elsewhere.turn == 1
    assert elsewhere.published.standing() == session.published.standing()  # why each tool is there, too
    assert (await b.for_request(tab("tab-2"))).published.ids() == []  # another session stays apart

    keys = redis_server.client().keys(NAMESPACE + "*")
    assert len(keys) == 1  # namespaced, one per session that has state
    assert 0 < redis_server.client().pttl(keys[0]) <= TTL_S * 1000  # and expiring


async def test_a_change_made_elsewhere_reaches_the_copy_held_here(
    redis_server: RedisServer, replica: Callable[[], SessionStore]
) -> None:
    a, b = replica(), replica()
    heard: list[Session] = []

    async def on_changed(session: Session) -> None:
        heard.append(session)

    held_by_b = await b.for_request(tab())
    async with anyio.create_task_group() as tg:
        tg.start_soon(b.watch, on_changed)
        session = await a.for_request(tab())
        # b subscribes in the background: repeat the change until b has heard one
        for turn_text in ("weather in Paris", "and in Rome?", "and in Oslo?", "and in Lima?"):
            find_turn(session, ["weather__forecast"], turn_text)
            await a.commit(session)
            with anyio.move_on_after(3):
                await eventually(lambda: bool(heard))
            if heard:
                break
        tg.cancel_scope.cancel()
    # the replica holding it was told, so it can notify its listen streams (on a busy machine a repeat
    # of the change may be heard too: each time it is the copy b holds)
    assert heard and all(s is held_by_b for s in heard), heard
    assert held_by_b.published.ids() == ["weather__forecast"]
    assert held_by_b.context()[0] == "weather in Paris"


async def test_handshake_era_sessions_stay_in_their_process(
    redis_server: RedisServer, replica: Callable[[], SessionStore]
) -> None:
    a = replica()
    conn = connection()
    conn.exit_stack = ExitStack()
    session = await a.for_request(ctx("2025-11-25", conn))
    find_turn(session, ["time__get_current_time"], "what time is it")
    await a.commit(session)
    assert session.shared is None
    assert redis_server.client().keys(NAMESPACE + "*") == []


async def test_redis_down_at_start_and_mid_run_degrades_then_reconnects(
    redis_server: RedisServer, replica: Callable[[], SessionStore], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="toolweave")
    shared = RedisSessions(redis_server.url, TTL_S)
    a = SessionStore(max_tools=5, pinned=(), shared=shared)
    redis_server.kill()  # down before the replica ever reached it
    async with anyio.create_task_group() as tg:
        tg.start_soon(a.watch, None)
        session = await a.for_request(tab())
        find_turn(session, ["time__get_current_time"], "what time is it in Tokyo")
        session.published.touch("time__get_current_time", session.next_turn())  # called: it stays
        await a.commit(session)  # never raises: kept locally
        find_turn(session, ["time__convert_time"], "convert it to Paris time")
        await a.commit(session)
        again = await a.for_request(tab())
        assert again is session and session.dirty
        assert again.published.ids() == ["time__get_current_time", "time__convert_time"]

        redis_server.start()  # back, empty (it keeps nothing across a restart)
        await eventually(lambda: shared.healthy)
        await a.for_request(tab())
        # written back by the next request or by the resync within a second (the first command after
        # the restart may still meet a connection to the old server, which counts as one more failure)
        await eventually(lambda: not session.dirty)
        tg.cancel_scope.cancel()

    other = await replica().for_request(tab())
    assert other.published.ids() == ["time__get_current_time", "time__convert_time"]
    assert other.context() == ["what time is it in Tokyo", "convert it to Paris time"]

    down = [r for r in caplog.records if "unreachable" in r.getMessage()]
    assert len(down) == 1  # logged once, however many attempts failed
    assert "127.0.0.1" in down[0].getMessage()
    assert any("reachable again" in r.getMessage() for r in caplog.records)
    assert PASSWORD not in caplog.text
