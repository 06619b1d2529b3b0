"""A registry on object storage: an s3:// URI against a real S3-compatible server (moto's server mode,
started on 127.0.0.1 by the test), through the library and the CLI."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.redis_server import RedisServer
from tests.s3 import moto_bucket
from toolweave.cli import app
from toolweave.records import DependencyEdge, EdgeKind, ToolRecord
from toolweave.registry import Embedder, Registry
from toolweave.retrieval import retrieve_tools
from toolweave.settings import Settings

pytestmark = pytest.mark.integration

moto_server = pytest.importorskip(
    "moto.server", reason="moto[server] is not installed (pip install -e '.[dev]'): no S3-compatible server"
)


@pytest.fixture
def s3(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    yield from moto_bucket(monkeypatch)


TOOLS = [
    ToolRecord(
        id="demo__get_stock_price",
        source="demo",
        name="get_stock_price",
        description="Current share price of a company's stock, by ticker symbol.",
    ),
    ToolRecord(
        id="demo__get_stock_ticker",
        source="demo",
        name="get_stock_ticker",
        description="Look up the stock ticker symbol of a company by its name.",
    ),
    ToolRecord(
        id="demo__get_weather", source="demo", name="get_weather", description="Weather forecast for a city."
    ),
]
EDGE = DependencyEdge(
    tool="demo__get_stock_price",
    depends_on="demo__get_stock_ticker",
    kind=EdgeKind.PARAMETER_DIRECTLY_DEPENDS_ON,
    parameter_name="ticker",
)


def test_a_registry_lives_in_a_bucket(
    s3: dict[str, str], shared_embedder: Embedder, registry_lock: RedisServer
) -> None:
    settings = Settings(home="s3://registry/team/tools", registry_storage_options=s3)
    assert settings.home == "s3://registry/team/tools"
    reg = Registry.open(settings=settings, embedder=shared_embedder)
    reg.ingest("demo", TOOLS, [EDGE])
    again = Registry.open(settings=settings, embedder=shared_embedder)
    ranked = retrieve_tools(again, "What is Apple's share price?")
    assert [r.tool_id for r in ranked][:2] == ["demo__get_stock_price", "demo__get_stock_ticker"]
    assert again.text_hits("weather forecast", 1)[0].tool_id == "demo__get_weather"
    assert set(again.edges()) == {EDGE}
    assert Registry.reindex(settings.home, embedder=shared_embedder, settings=settings) == 3
    assert len(Registry.open(settings=settings, embedder=shared_embedder)) == 3


def test_the_cli_takes_an_s3_registry(
    s3: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, registry_lock: RedisServer
) -> None:
    catalog = tmp_path / "tools.jsonl"
    catalog.write_text(
        "\n".join(
            json.dumps(t)
            for t in [
                {"name": "get_stock_ticker", "description": "Look up a company's stock ticker symbol."},
                {
                    "name": "get_stock_price",
                    "description": "Share price by ticker.",
                    "depends_on": ["get_stock_ticker"],
                },
            ]
        )
    )
    monkeypatch.setenv("TOOLWEAVE_REGISTRY_STORAGE_OPTIONS", json.dumps(s3))
    runner = CliRunner()
    uri = "s3://registry/cli"
    done = runner.invoke(app, ["ingest-catalog", str(catalog), "-s", "fin", "--registry", uri, "--json"])
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout)["added"] == 2 and json.loads(done.stdout)["edges"] == 1
    found = runner.invoke(app, ["search", "stock price", "--registry", uri, "--json"])
    assert found.exit_code == 0, found.output
    assert "fin__get_stock_price" in found.stdout and "fin__get_stock_ticker" in found.stdout


def test_a_missing_bucket_is_one_line_saying_what_to_create(
    s3: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, registry_lock: RedisServer
) -> None:
    catalog = tmp_path / "tools.jsonl"
    catalog.write_text(json.dumps({"name": "get_weather", "description": "Weather forecast for a city."}))
    monkeypatch.setenv("TOOLWEAVE_REGISTRY_STORAGE_OPTIONS", json.dumps(s3))
    uri = "s3://no-such-bucket/team"
    done = CliRunner().invoke(app, ["ingest-catalog", str(catalog), "-s", "w", "--registry", uri])
    assert done.exit_code == 1
    said = done.output.strip()
    assert "\n" not in said, said
    assert "the bucket no-such-bucket does not exist: create it" in said
    assert "RetryError" not in said and "cargo" not in said
