"""What the proxied call's path keeps between calls to cost less: each shortcut answers as before."""

from __future__ import annotations

import math

import anyio
import pytest
from prometheus_client.parser import text_string_to_metric_families

from toolweave.server.calls.metrics import GatewayMetrics
from toolweave.server.calls.scopes import cancel_scope, loop_time


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
