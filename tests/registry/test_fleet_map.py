"""The fleet's request map through a real registry on disk: refit from recorded calls, shared by replicas,
applied to searches, switched off and reset (real embedder, real LanceDB, the real CLI)."""

from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.registry.test_usage import TOOLS, VECTOR
from toolweave.cli import app
from toolweave.registry import Embedder, Registry
from toolweave.retrieval import retrieve_tools
from toolweave.settings import Settings

pytestmark = pytest.mark.integration

# ``ledger_post`` says what it does in accountant's words (``TOOLS``); this fleet's users ask in their own.
CALLS = {
    "demo__ledger_post": [
        "transfer money from checking to savings",
        "move cash into my savings account",
        "send 50 dollars from my current account to my savings",
        "put 300 euros aside into the holiday savings pot",
        "shift funds between my two accounts",
        "move my salary into the joint account",
        "transfer 20 pounds to my savings",
    ],
    "demo__get_weather": [
        "is it going to rain in Paris tomorrow",
        "do I need an umbrella in London",
        "how hot will it be in Madrid",
    ],
    "demo__send_email": ["write to bob@example.com that I am late", "mail the report to alice@example.com"],
    "demo__bank_balance": ["how much money do I have", "what is left on my card"],
    "demo__create_invoice": ["bill ACME for the March work", "charge the customer for 3 hours"],
}
QUERY = "move 200 dollars from my checking into my savings"  # not a recorded request


def rank_of(reg: Registry, tool_id: str, query: str = QUERY) -> int:
    ids = [r.tool_id for r in retrieve_tools(reg, query, VECTOR)]
    return ids.index(tool_id) if tool_id in ids else len(ids)


def with_traffic(path: Path, embedder: Embedder, **settings: object) -> Registry:
    """A registry holding ``TOOLS`` and the recorded ``CALLS``; searches then leave usage vectors out
    (``usage_weight`` 0), so what moves a rank is the map alone."""
    base = Settings.model_validate({"fleet_map_min_examples": 10, **settings})
    reg = Registry.open(path, embedder=embedder, settings=base)
    reg.ingest("demo", TOOLS)
    for tool_id, requests in CALLS.items():
        for request in requests:
            assert reg.record_usage(tool_id, request)
    assert reg.flush_observations()
    reg.settings = base.model_copy(update={"usage_weight": 0.0})
    return reg


def test_a_refit_from_recorded_calls_lifts_the_fleets_wording_and_a_reset_restores(
    tmp_path: Path, shared_embedder: Embedder
) -> None:
    reg = with_traffic(tmp_path / "r", shared_embedder)
    follower = Registry.open(tmp_path / "r", embedder=shared_embedder, settings=reg.settings)
    plain = [r.tool_id for r in retrieve_tools(reg, QUERY, VECTOR)]
    assert rank_of(reg, "demo__ledger_post") > 0

    refit = reg.fleet_map.refit()
    assert (refit.outcome, refit.examples, refit.requests, refit.tools) == ("fitted", 16, 16, 5)
    assert rank_of(reg, "demo__ledger_post") == 0
    # untouched tools keep their place for their own wording
    assert rank_of(reg, "demo__get_weather", "weather forecast for Berlin") == 0

    # stored in the registry: another process loads it, at open or at its next poll
    assert follower.refresh()
    assert follower.fleet_map.current() is not None
    assert rank_of(follower, "demo__ledger_post") == 0
    reopened = Registry.open(tmp_path / "r", embedder=shared_embedder, settings=reg.settings)
    assert reopened.fleet_map.current() is not None

    # the same traffic is not refit; switched off, searches rank as before the map
    assert reg.fleet_map.refit().outcome == "unchanged"
    reg.settings = reg.settings.model_copy(update={"fleet_map": False})
    assert [r.tool_id for r in retrieve_tools(reg, QUERY, VECTOR)] == plain
    reg.settings = reg.settings.model_copy(update={"fleet_map": True})

    assert reg.fleet_map.reset()
    assert reg.fleet_map.current() is None
    assert [r.tool_id for r in retrieve_tools(reg, QUERY, VECTOR)] == plain
    assert follower.refresh()
    assert follower.fleet_map.current() is None
    assert not reg.fleet_map.reset()
    for r in (reg, follower, reopened):
        r.close()


def test_the_map_moves_no_request_whose_nearest_tool_had_no_traffic(
    tmp_path: Path, shared_embedder: Embedder
) -> None:
    reg = with_traffic(tmp_path / "r", shared_embedder)
    plain = [r.tool_id for r in retrieve_tools(reg, QUERY, VECTOR)]
    assert plain[0] != "demo__ledger_post"
    assert reg.fleet_map.refit().outcome == "fitted"
    fitted = reg.fleet_map.current()
    assert fitted is not None and fitted.reached == frozenset(CALLS)
    assert rank_of(reg, "demo__ledger_post") == 0
    # stored with the map: a replica gates the same way
    reopened = Registry.open(tmp_path / "r", embedder=shared_embedder, settings=reg.settings)
    reopened_map = reopened.fleet_map.current()
    assert reopened_map is not None and reopened_map.reached == fitted.reached

    # had the request's nearest tool seen no traffic, the map would have left the request alone
    reg._state.fleet_map = replace(fitted, reached=fitted.reached - {plain[0]})
    assert [r.tool_id for r in retrieve_tools(reg, QUERY, VECTOR)] == plain
    # a map stored before the reached tools were kept applies to every request, as it did
    reg._state.fleet_map = replace(fitted, reached=None)
    assert rank_of(reg, "demo__ledger_post") == 0
    for r in (reg, reopened):
        r.close()


def test_too_few_recorded_calls_fit_no_map(tmp_path: Path, shared_embedder: Embedder) -> None:
    reg = with_traffic(tmp_path / "r", shared_embedder, fleet_map_min_examples=100)
    assert reg.fleet_map.refit().outcome == "too few"
    assert reg.fleet_map.current() is None
    reg.close()


def test_the_adapt_command_refits_and_resets(
    tmp_path: Path, shared_embedder: Embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    with_traffic(tmp_path / "r", shared_embedder).close()
    monkeypatch.setenv("TOOLWEAVE_FLEET_MAP_MIN_EXAMPLES", "10")
    runner = CliRunner()
    result = runner.invoke(app, ["adapt", "--registry", str(tmp_path / "r"), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["outcome"] == "fitted"
    reg = Registry.open(tmp_path / "r", embedder=shared_embedder)
    assert reg.fleet_map.current() is not None
    reg.close()
    result = runner.invoke(app, ["adapt", "--registry", str(tmp_path / "r"), "--reset"])
    assert result.exit_code == 0, result.output
    assert "deleted" in result.stdout
    reg = Registry.open(tmp_path / "r", embedder=shared_embedder)
    assert reg.fleet_map.current() is None
    reg.close()


def test_a_gateway_with_a_refit_interval_fits_the_map_in_the_background(
    tmp_path: Path, shared_embedder: Embedder
) -> None:
    reg = with_traffic(tmp_path / "r", shared_embedder, fleet_map_refit_s=0.2)
    for _ in range(600):  # the schedule's thread, not this one, fits it
        if reg.fleet_map.current() is not None:
            break
        time.sleep(0.1)
    assert reg.fleet_map.current() is not None
    assert rank_of(reg, "demo__ledger_post") == 0
    reg.close()
