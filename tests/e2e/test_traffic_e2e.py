"""The gateway learns an edge from live traffic: a real `toolweave serve` in front of a real upstream MCP
server (tests/upstreams/orders.py) whose order ids only travel from one call's result into the next
call's arguments. Two client sessions place an order and read it back; the third session is offered
`get_order_details` right after its `place_order`, and the edge survives the gateway's restart."""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
import pytest
from mcp import Client

from tests.results import call_through

from .conftest import (
    UPSTREAMS,
    committed_learned_edges,
    learned_edges,
    start_http_gateway,
    stop,
    until_callable,
)
from .watch import Relister, relisting
from .watch import names as listed_names

pytestmark = [pytest.mark.integration, pytest.mark.anyio]

PLACE, DETAILS = "shop__place_order", "shop__get_order_details"


async def test_value_flow_in_two_sessions_becomes_an_edge_the_next_session_uses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TOOLWEAVE_USAGE_FLUSH_S", "0.5")  # observations written every half second
    monkeypatch.setenv("TOOLWEAVE_PUBLISH__RELIST_WAIT_MS", "5000")
    monkeypatch.setenv("TOOLWEAVE_PUBLISH__RELIST_PROBE_MS", "5000")
    manifest = tmp_path / "gw.yaml"
    manifest.write_text(
        f"servers:\n  shop:\n    command: {sys.executable}\n    args: [{UPSTREAMS / 'orders.py'}]\n",
        encoding="utf-8",
    )
    registry = tmp_path / "registry"
    gateway = start_http_gateway(manifest, registry, tmp_path / "gw.log")
    try:
        await until_callable(gateway.url, PLACE, 300)
        for item in ("lamp", "chair"):  # two sessions, each its own order id
            async with Client(gateway.url, mode="legacy") as client:
                await client.call_tool("find_tools", {"query": f"order a {item} and show me the order"})
                placed = await call_through(client, PLACE, {"item": item})
                details = await call_through(client, DETAILS, {"order_id": placed["order_id"]})
                assert details["item"] == item
        [edge] = await committed_learned_edges(registry, DETAILS, 60)
        assert (edge["tool"], edge["parameter"], edge["kind"]) == (
            PLACE,
            "order_id",
            "PARAMETER_DIRECTLY_DEPENDS_ON",
        )
        assert edge["reason"] == f"learned from 2 sessions: {DETAILS}.order_id took {PLACE}'s order_id"
        assert edge["confidence"] >= 0.5

        # a third session, which never searched: right after its place_order, the details tool is listed
        relister = Relister()
        async with (
            Client(gateway.url, mode="legacy", message_handler=relister.on_message) as client,
            relisting(client, relister),
        ):
            before = listed_names(await client.list_tools(cache_mode="bypass"))
            assert DETAILS not in before
            await call_through(client, PLACE, {"item": "desk"})
            await relister.settled()
            assert relister.lists and DETAILS in relister.lists[-1]
    finally:
        stop(gateway.proc)
    assert (await anyio.to_thread.run_sync(learned_edges, registry, DETAILS)) == [
        edge
    ]  # kept across the stop
    log = (tmp_path / "gw.log").read_text(errors="replace")
    assert "ORD-" not in log  # no value reached the log
