"""Docs that must stay true: the settings page is the settings model, the README keeps its two commands."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from toolweave.cli import app

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
