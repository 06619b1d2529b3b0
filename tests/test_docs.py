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
