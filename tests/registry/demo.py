"""The small fleet the registry tests share: stock, connectivity and weather tools, two edges."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.edges import edge
from toolweave.records import ToolRecord
from toolweave.registry import Embedder, Registry
from toolweave.registry.database import RegistryDatabase, RegistryLocation

__all__ = ["BANK", "EDGES", "TOOLS", "committed_generation", "demo_registry", "stored_examples", "tool"]


def tool(name: str, description: str, source: str = "demo", **fields: Any) -> ToolRecord:
    return ToolRecord(id=f"{source}__{name}", source=source, name=name, description=description, **fields)


TOOLS = [
    tool("get_stock_price", "Current share price of a company's stock, by ticker symbol."),
    tool("get_stock_ticker", "Look up the stock ticker symbol of a company by its name."),
    tool("check_connectivity", "Check whether the device is connected to the internet.", kind="core"),
    tool("get_weather", "Weather forecast for a city."),
]
EDGES = [
    edge(
        "demo__get_stock_price",
        "demo__get_stock_ticker",
        "ticker",
        reason="the price needs a ticker symbol",
        confidence=0.75,
        evidence="catalog",
    ),
    edge("demo__get_stock_ticker", "demo__check_connectivity"),
]

BANK = [
    tool("get_user_token", "Log in with username and password; returns the user's token.", source="bank"),
    tool(
        "add_alarm",
        "Set an alarm.",
        source="bank",
        input_schema={
            "type": "object",
            "properties": {"token": {"type": "string"}, "time": {"type": "string"}},
        },
    ),
]
"""A source that declares no edges: inference links the alarm to the login that issues its token."""


def demo_registry(path: Path, embedder: Embedder, tools: list[ToolRecord] = TOOLS) -> Registry:
    """A registry at ``path`` holding ``tools`` (source ``demo``) and ``EDGES``."""
    registry = Registry.open(path, embedder=embedder)
    registry.ingest("demo", tools, EDGES)
    return registry


def stored_examples(location: RegistryLocation, tool_id: str) -> list[str]:
    """The usage examples of ``tool_id`` that the registry at ``location`` has committed, newest first:
    read from its usage table at the committed version, as any other process would read them."""
    database = RegistryDatabase.open(location)
    return [e.query for e in database.usage_table().load_all().get(tool_id, [])]


def committed_generation(location: RegistryLocation) -> int:
    """The generation the commit record of the registry at ``location`` names now (read from storage)."""
    return RegistryDatabase.open(location).generation()
