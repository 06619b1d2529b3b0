"""`make bench` (bench/run_all.py) names only runners that exist, and a missing one fails the run."""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


def test_every_listed_runner_exists() -> None:
    runners = runpy.run_path(str(BENCH / "run_all.py"))["RUNNERS"]
    assert [r for r, *_ in runners if not (BENCH / r).is_file()] == []


def test_a_missing_runner_fails_the_run(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    module = runpy.run_path(str(BENCH / "run_all.py"))
    main = module["main"]
    main.__globals__["RUNNERS"] = [["no_such_runner.py"]]
    monkeypatch.setattr(sys, "argv", ["run_all.py"])
    assert main() == 1
    assert "no_such_runner.py: no such runner" in capsys.readouterr().err
