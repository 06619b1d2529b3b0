"""`toolweave ingest-catalog`, `search` and `bench` through the real CLI (CliRunner, real embedder)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from toolweave.cli import app

pytestmark = pytest.mark.integration


def params(*names: str) -> dict[str, object]:
    return {"type": "object", "properties": {n: {"type": "string"} for n in names}}


TOOLS = [
    {"name": "GetUserToken", "description": "Log in with username and password and get a user token.",
     "parameters": params("username", "password"), "depends_on": []},
    {"name": "AddAlarm", "description": "Set an alarm clock at a given time.",
     "parameters": params("token", "time"), "depends_on": ["GetUserToken"]},
    {"name": "QueryStock", "description": "Current price of a stock.",
     "parameters": params("stock_code"), "depends_on": []},
]  # fmt: skip
QUERIES = [
    {
        "id": "q1",
        "query": "Wake me up at 7 tomorrow with an alarm",
        "gold_tools": ["AddAlarm", "GetUserToken"],
    },
    {"id": "q2", "query": "How much is a share of Tesla worth?", "gold_tools": ["QueryStock"]},
]


@pytest.fixture
def tiny_dataset(tmp_path: Path) -> Path:
    folder = tmp_path / "tiny"
    folder.mkdir()
    (folder / "tools.jsonl").write_text("\n".join(json.dumps(t) for t in TOOLS))
    (folder / "queries.jsonl").write_text("\n".join(json.dumps(q) for q in QUERIES))
    return folder


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_ingest_then_search_explains_dependencies(tiny_dataset: Path, tmp_path: Path) -> None:
    reg = str(tmp_path / "reg")
    code, out, _ = run("ingest-catalog", str(tiny_dataset), "--source", "bank", "--registry", reg, "--json")
    assert code == 0
    assert json.loads(out.strip().splitlines()[-1])["embedded"] == 3
    code, out, _ = run("ingest-catalog", str(tiny_dataset), "--source", "bank", "--registry", reg, "--json")
    summary = json.loads(out.strip().splitlines()[-1])
    assert (summary["embedded"], summary["unchanged"]) == (0, 3)

    code, out, _ = run("search", "set an alarm for 7am", "--registry", reg, "--top-k", "1", "--json")
    assert code == 0
    rows = json.loads(out)
    assert [r["id"] for r in rows[:2]] == ["bank__AddAlarm", "bank__GetUserToken"]
    assert rows[1]["reason"] == "dependency" and rows[1]["via"] == "bank__AddAlarm"

    code, out, err = run("tools", "quarantine", "--registry", reg)  # a real registry: read, not refused
    assert (code, out.strip()) == (0, "no tools in quarantine"), err


def test_bench_prints_metrics_as_json(tiny_dataset: Path) -> None:
    code, out, err = run("bench", str(tiny_dataset), "--json")
    assert code == 0, err
    row = json.loads(out.strip().splitlines()[-1])
    assert row["dataset"] == "tiny" and row["method"] == "grtf" and row["queries"] == 2
    for key in (
        "map@10",
        "recall@10",
        "ndcg@10",
        "complete@10",
        "map@30",
        "latency_ms_p50",
        "latency_ms_p95",
        "index_s",
    ):
        assert key in row
    assert row["recall@10"] == 1.0  # both queries: their tools (and AddAlarm's dependency) are found


def test_bad_input_is_one_clear_line_and_exit_1(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("[{]")
    code, _, err = run("ingest-catalog", str(bad), "--source", "x", "--registry", str(tmp_path / "reg"))
    assert code == 1 and err.startswith("error: ") and str(bad) in err and "Traceback" not in err
    code, _, err = run("bench", "no-such-dataset")
    assert code == 1 and "no benchmark folder 'no-such-dataset'" in err
    code, _, err = run("search", "x", "--registry", str(tmp_path / "reg2"), "--method", "magic")
    assert code == 1 and "--method" in err
    code, _, err = run("bench", "no-such-dataset", "--split", "train")
    assert code == 1 and "--split: expected all, test, examples, got 'train'" in err
    (tmp_path / "empty").mkdir()
    code, _, err = run("tools", "quarantine", "--registry", str(tmp_path / "empty"))
    assert code == 1 and "is not a toolweave registry" in err


def test_errors_from_inside_task_groups_are_one_line_too(capsys: pytest.CaptureFixture[str]) -> None:
    import typer

    from toolweave.commands.options import user_errors
    from toolweave.errors import CatalogError

    with pytest.raises(typer.Exit), user_errors():
        raise ExceptionGroup("lifespan", [ExceptionGroup("catalogs", [CatalogError("bad.json: malformed")])])
    assert capsys.readouterr().err == "error: bad.json: malformed\n"
    with pytest.raises(ExceptionGroup), user_errors():  # not ours: a bug, keep the traceback
        raise ExceptionGroup("x", [RuntimeError("bug")])


def test_a_bad_setting_in_the_environment_is_named(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("TOOLWEAVE_LOG_LEVEL", "verbose")
    code, _, err = run("search", "x", "--registry", str(tmp_path / "reg"))
    assert code == 1 and err.startswith("error: TOOLWEAVE_LOG_LEVEL:")
