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
from toolweave.server.sessions.replica import _Followed, poll_once
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


SECRET = "hunter2-base-url-secret"
SPEC = """openapi: 3.0.3
info: {title: pets, version: "1"}
paths:
  /pets:
    get:
      operationId: listPets
      summary: List the pets.
      responses: {"200": {description: ok}}
"""


async def test_an_openapi_source_is_shared_and_logged_with_its_references_never_their_values(
    tmp_path: Path, embedder: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """No value expanded from ``${VAR}`` reaches the registry's files or a log line, whatever the kind
    of source: an OpenAPI ``base_url`` is expanded at load (the adapter needs it), but shared raw."""
    import logging

    from toolweave.adapters.kinds import kind_named
    from toolweave.manifest import load_manifest
    from toolweave.server.sessions.replica import share_sources

    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv("SECRET_TOKEN", SECRET)
    (tmp_path / "pets.yaml").write_text(SPEC, encoding="utf-8")
    written = 'base_url: "http://admin:${SECRET_TOKEN}@127.0.0.1:9/v1?key=${SECRET_TOKEN}"'
    (tmp_path / "fleet.yaml").write_text(f"openapi:\n  pets:\n    spec: pets.yaml\n    {written}\n")
    manifest = load_manifest(tmp_path / "fleet.yaml")
    assert manifest.backends()[0].config.base_url.startswith(f"http://admin:{SECRET}@")  # what calls use
    logging.getLogger("toolweave.test").info("%s", manifest.describe())  # what a gateway logs at start

    registry = Registry.open(tmp_path / "reg", embedder=embedder)
    settings = Settings(home=tmp_path / "reg", registry_follow_sources=False)
    gateway = Gateway(registry, [], settings, manifest=manifest)
    await share_sources(gateway.sources)
    registry.close()

    stored = [p for p in (tmp_path / "reg").rglob("*") if p.is_file() and SECRET.encode() in p.read_bytes()]
    assert stored == []
    assert SECRET not in caplog.text
    (spec,) = registry.source_specs()
    assert "${SECRET_TOKEN}" in spec.spec
    # another replica expands the reference from its own environment
    kind = kind_named(spec.kind)
    assert kind is not None
    theirs = kind.parse_shared(spec.spec, {"SECRET_TOKEN": "theirs"})
    assert theirs.base_url == "http://admin:theirs@127.0.0.1:9/v1?key=theirs"
