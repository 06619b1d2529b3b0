"""``ProgressInOrder``: a call's answer waits for the progress reports already being passed on (the SDK
runs each progress callback as a task of its own), and never for long."""

from __future__ import annotations

import anyio
import pytest

from toolweave.adapters.backend import ProgressInOrder

pytestmark = pytest.mark.anyio


async def test_the_answer_waits_for_reports_being_passed_on() -> None:
    sent: list[tuple[float, float | None, str | None]] = []

    async def slow_client(progress: float, total: float | None, message: str | None) -> None:
        await anyio.sleep(0.2)  # a busy client link
        sent.append((progress, total, message))

    forward = ProgressInOrder(slow_client)
    await forward.settled()  # nothing passed on yet: no wait
    async with anyio.create_task_group() as tg:
        tg.start_soon(forward, 1.0, 2.0, "half")  # as the SDK spawns it
        await anyio.sleep(0)  # the report's task starts before the answer is handled
        await forward.settled()
        assert sent == [(1.0, 2.0, "half")]


async def test_a_report_that_hangs_holds_the_answer_at_most_the_bound() -> None:
    async def hung(progress: float, total: float | None, message: str | None) -> None:
        await anyio.sleep_forever()

    forward = ProgressInOrder(hung)
    async with anyio.create_task_group() as tg:
        tg.start_soon(forward, 1.0, None, None)
        await anyio.sleep(0)
        with anyio.fail_after(5):
            await forward.settled(within_s=0.05)
        tg.cancel_scope.cancel()
