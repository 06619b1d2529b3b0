"""``PausedBudget``: a call's deadline stops while its client answers the upstream's request (a person
filling in an elicitation form is not the upstream's time), runs again after, and an answer that never
comes is given up at ``CLIENT_ANSWER_LIMIT_S``."""

from __future__ import annotations

import asyncio
import math

import anyio
import mcp_types as types
import pytest

from toolweave.adapters import backend
from toolweave.adapters.backend import PausedBudget

pytestmark = pytest.mark.anyio


class Deadline:
    def __init__(self, at: float) -> None:
        self.at = at
        self.moves: list[float] = []

    def put(self, at: float) -> None:
        self.at = at
        self.moves.append(at)


def form(seconds: float, event: anyio.Event | None = None) -> backend.Elicitor:
    async def user(params: types.ElicitRequestParams) -> types.ElicitResult:
        if event is not None:
            await event.wait()
        await anyio.sleep(seconds)
        return types.ElicitResult(action="accept", content={"sure": True})

    return user


ASKED = types.ElicitRequestFormParams(message="Sure?", requested_schema={"type": "object", "properties": {}})


async def test_the_deadline_stops_while_the_client_answers_and_keeps_what_was_left() -> None:
    now = asyncio.get_running_loop().time
    deadline = Deadline(now() + 10.0)
    budget = PausedBudget(lambda: deadline.at, deadline.put)
    assert budget.pausing(None) is None
    answer = await budget.pausing(form(0.3))(ASKED)  # type: ignore[misc]
    assert isinstance(answer, types.ElicitResult) and answer.action == "accept"
    paused, resumed = deadline.moves
    assert paused == math.inf
    assert 9.5 < resumed - now() <= 10.0  # the 0.3 s the user took came back


async def test_overlapping_questions_resume_the_deadline_once_both_are_answered() -> None:
    now = asyncio.get_running_loop().time
    deadline = Deadline(now() + 10.0)
    budget = PausedBudget(lambda: deadline.at, deadline.put)
    first_done = anyio.Event()
    async with anyio.create_task_group() as tg:
        tg.start_soon(budget.pausing(form(0.05)), ASKED)  # type: ignore[arg-type]
        tg.start_soon(budget.pausing(form(0.05, first_done)), ASKED)  # type: ignore[arg-type]
        await anyio.sleep(0.2)
        assert deadline.at == math.inf  # the first is answered, the second still waits
        first_done.set()
    assert deadline.moves[0] == math.inf and deadline.moves[-1] != math.inf and len(deadline.moves) == 2


async def test_a_client_that_never_answers_is_given_up(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(backend, "CLIENT_ANSWER_LIMIT_S", 0.2)
    deadline = Deadline(asyncio.get_running_loop().time() + 10.0)
    budget = PausedBudget(lambda: deadline.at, deadline.put)
    answer = await budget.pausing(form(3600))(ASKED)  # type: ignore[misc]
    assert isinstance(answer, types.ErrorData) and "did not answer within 0.2 s" in answer.message
    assert deadline.at != math.inf
