"""Docs that must stay true: the settings page is the settings model, the README keeps its two commands."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from toolweave.cli import app
from toolweave.registry.database import table_names
from toolweave.registry.embeddings import Embedder

REPO = Path(__file__).resolve().parents[1]


def test_settings_page_lists_every_setting_exactly() -> None:
    table = CliRunner().invoke(app, ["settings", "--markdown"]).stdout.strip().splitlines()
    page = (REPO / "docs" / "settings.md").read_text(encoding="utf-8").splitlines()
    rows = [line for line in page if line.startswith("|")]
    assert rows == table, "docs/settings.md is stale: regenerate it with `toolweave settings --markdown`"


def test_readme_starts_with_the_two_commands_and_ci_runs_the_test_one() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    first_block = readme.split("```")[1]
    commands = [line.split("#")[0].strip() for line in first_block.splitlines()[1:] if line.strip()]
    assert commands == ["make run", "make test"]
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    assert "\nmake test\n" in ci


def test_no_text_file_holds_a_merge_conflict() -> None:
    """A merge's conflict markers once landed in docs/architecture.md, both sides kept, unnoticed."""
    marker = re.compile(r"^(<{7}|>{7}) ", re.MULTILINE)
    folders = ("docs", "bench", "toolweave", "tests", "manifests")
    texts = [
        REPO / "README.md",
        *(p for f in folders for p in (REPO / f).rglob("*") if p.suffix in TEXT_SUFFIXES),
    ]
    held = [
        str(p.relative_to(REPO))
        for p in texts
        if marker.search(p.read_text(encoding="utf-8", errors="replace"))
    ]
    assert held == [], f"conflict markers in {held}"


TEXT_SUFFIXES = {".md", ".py", ".yaml", ".yml", ".toml", ".json", ".mjs", ".html", ".js", ".css"}


def test_architecture_page_names_only_paths_that_exist() -> None:
    import re

    page = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    named = set(re.findall(r"`((?:toolweave|bench|tests)/[\w./]*)`", page))
    assert len(named) >= 10, "the page should name the folders it describes"
    missing = sorted(p for p in named if not (REPO / p).exists())
    assert not missing, f"docs/architecture.md names paths that do not exist: {missing}"
    folders = {p.name for p in (REPO / "toolweave").iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    undocumented = sorted(f for f in folders if f"toolweave/{f}/" not in page)
    assert not undocumented, f"docs/architecture.md does not describe: {undocumented}"


@pytest.mark.integration
def test_the_registry_page_lists_every_table_a_registry_holds(
    tmp_path: Path, shared_embedder: Embedder
) -> None:
    """Every table a registry writes, found by using one (ingest with edges, overrides, a usage example,
    source specs, the quarantine, a reindex) and listing its database, is a row of docs/registry.md's
    table, and every row is a table that exists."""
    import lancedb

    from tests.registry.demo import EDGES, TOOLS
    from toolweave.registry import Registry
    from toolweave.registry.overrides import GraphOverrides
    from toolweave.registry.quarantine import QuarantineStore
    from toolweave.registry.sources import SourceSpec

    path = tmp_path / "reg"
    reg = Registry.open(path, embedder=shared_embedder)
    reg.ingest("demo", TOOLS, EDGES)
    reg.set_overrides(GraphOverrides(pin=[EDGES[0]]))
    reg.set_source_specs([SourceSpec("demo", "mcp", "{}")])
    assert reg.record_usage(TOOLS[0].id, "what does a share of ACME cost")
    reg.close()
    QuarantineStore(path).review("demo", TOOLS)
    Registry.reindex(path, embedder=shared_embedder)
    written = {re.sub(r"_g\d+$", "", name) for name in table_names(lancedb.connect(str(path)))}

    page = (REPO / "docs" / "registry.md").read_text(encoding="utf-8")
    section = page.split("## What a registry holds", 1)[1].split("\n## ", 1)[0]
    listed = {m.group(1) for m in re.finditer(r"^\| `(\w+)`", section, re.MULTILINE)}
    assert listed == written, f"docs/registry.md lists {sorted(listed)}; a registry holds {sorted(written)}"
