"""What the proxied call's path keeps between calls to cost less: each shortcut answers as before."""

from __future__ import annotations

import asyncio
import math

import anyio
import pytest
from prometheus_client.parser import text_string_to_metric_families

from toolweave.server.calls.metrics import GatewayMetrics
from toolweave.server.calls.scopes import Overdue, cancel_scope, loop_time


def test_turn_metrics_count_every_turn_under_its_own_labels() -> None:
    """The series' children are kept between turns: every turn still counts, each under its labels,
    and a series touched through ``labels()`` elsewhere is the same series."""
    metrics = GatewayMetrics()
    for tool, outcome in [("a", "ok"), ("a", "ok"), ("a", "timeout"), ("b", "ok")]:
        metrics.turn("call", tool, outcome, 0.002)
    metrics.calls.labels("a", "ok").inc()
    metrics.turn("find_tools", "find_tools", "ok", 0.02)
    families = {f.name: f for f in text_string_to_metric_families(metrics.scrape().decode())}
    calls = {
        (s.labels["tool"], s.labels["outcome"]): s.value
        for s in families["toolweave_calls"].samples
        if s.name == "toolweave_calls_total"
    }
    assert calls == {("a", "ok"): 3, ("a", "timeout"): 1, ("b", "ok"): 1, ("find_tools", "ok"): 1}
    counts = {
        s.labels["kind"]: s.value
        for s in families["toolweave_turn_seconds"].samples
        if s.name == "toolweave_turn_seconds_count"
    }
    assert counts == {"call": 4, "find_tools": 1}


@pytest.mark.anyio
async def test_the_call_paths_scopes_are_anyios_with_anyios_clock() -> None:
    """``scopes.cancel_scope`` / ``loop_time``: the scope anyio would make, on anyio's clock (a deadline
    ends the block; a shield inside it still holds)."""
    assert abs(loop_time() - anyio.current_time()) < 0.5
    with cancel_scope(loop_time() + 0.05) as scope:
        assert isinstance(scope, anyio.CancelScope)
        with anyio.CancelScope(shield=True):
            await anyio.sleep(0.1)  # shielded: the deadline waits for it
        shielded_done = True
        await anyio.sleep(10)
    assert scope.cancelled_caught and shielded_done
    with cancel_scope() as unbounded:
        await anyio.sleep(0)
    assert unbounded.deadline == math.inf and not unbounded.cancelled_caught


@pytest.mark.anyio
async def test_overdue_ends_each_block_at_its_own_deadline_with_one_timer() -> None:
    """``scopes.Overdue`` (the proxy's margin): a block still running at its deadline leaves with
    ``TimeoutError``, not before; a later deadline watched first and an earlier one after it both fire;
    a block forgotten in time runs on; nothing stays watched."""
    overdue = Overdue()
    ended: dict[str, float] = {}
    order: list[str] = []

    async def block(name: str, after_s: float, runs_s: float) -> None:
        started = loop_time()
        try:
            async with asyncio.timeout(None) as timeout:
                overdue.watch(timeout, started + after_s)
                try:
                    await anyio.sleep(runs_s)
                finally:
                    overdue.forget(timeout)
        except TimeoutError:
            ended[name] = loop_time() - started
            order.append(name)
            return
        ended[name] = -1.0  # ran to its end

    async with anyio.create_task_group() as tg:
        tg.start_soon(block, "late", 0.4, 30)
        await anyio.sleep(0.01)
        tg.start_soon(block, "early", 0.1, 30)  # earlier than the timer waits for: it is set again
        tg.start_soon(block, "in time", 0.2, 0.05)
    assert ended["in time"] == -1.0
    assert ended["early"] >= 0.1 and ended["late"] >= 0.4  # never before its deadline
    assert order == ["early", "late"]  # each at its own deadline, not both at the first timer's
    assert len(overdue) == 0
    async with asyncio.timeout(None) as unwatched:  # a block it never saw: left alone
        overdue.forget(unwatched)
        await anyio.sleep(0)


def test_overdue_on_a_second_event_loop_watches_there() -> None:
    """A process may run one event loop after another (tests do): a block left by the first loop's
    abandoned call is dropped, and the second loop's deadline gets a timer of its own."""
    overdue = Overdue()

    async def first() -> None:
        async with asyncio.timeout(None) as block:
            overdue.watch(block, loop_time() + 3600)  # never forgotten: its loop is simply left

    async def second() -> bool:
        try:
            async with asyncio.timeout(None) as block:
                overdue.watch(block, loop_time() + 0.05)
                try:
                    await anyio.sleep(30)
                finally:
                    overdue.forget(block)
        except TimeoutError:
            return True
        return False

    anyio.run(first)
    assert len(overdue) == 1
    assert anyio.run(second)
    assert len(overdue) == 0
