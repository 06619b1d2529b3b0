"""The follower announces another replica's commits however they were loaded: by its poll, or by a write
of this replica that caught up with them first (then the poll itself finds nothing new to load)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from toolweave.records import ToolRecord
from toolweave.registry import Registry
from toolweave.registry.sources import SourceSpec
from toolweave.server.gateway import Gateway
from toolweave.server.replica import _Followed, poll_once
from toolweave.settings import Settings

pytestmark = [pytest.mark.anyio, pytest.mark.integration]


def tool(name: str, description: str, source: str) -> ToolRecord:
    return ToolRecord(id=f"{source}__{name}", source=source, name=name, description=description)


async def test_commits_loaded_by_a_write_of_this_replica_are_announced_too(
    tmp_path: Path, embedder: Any
) -> None:
    path = tmp_path / "reg"
    here = Registry.open(path, embedder=embedder)
    other = Registry.open(path, embedder=embedder)
    gateway = Gateway(here, [], Settings(home=path))
    followed = _Followed(here.foreign_loads, here.content_hashes())
    assert not await poll_once(gateway.sources, followed)  # nothing committed anywhere

    here.ingest("mine", [tool("get_weather", "Weather forecast for a city.", "mine")])
    assert not await poll_once(gateway.sources, followed)  # its own write: announced by the write itself

    other.ingest("theirs", [tool("get_stock_price", "Share price of a stock.", "theirs")])
    other.set_source_specs([SourceSpec("theirs", "catalog", "{}")])
    await gateway.find_cache.get("cached", _answer)
    here.ingest("mine", [tool("get_weather", "Weather forecast for a town.", "mine")])  # catches up first
    assert here.foreign_loads == 1 and not here.refresh()  # loaded already: a poll reloads nothing
    assert await poll_once(gateway.sources, followed)
    assert not gateway.find_cache.holds("cached")
    assert "theirs" in gateway.sources._catalog_sources  # the other replica's catalog is served here
    assert not await poll_once(gateway.sources, followed)


async def _answer() -> list[Any]:
    return []
