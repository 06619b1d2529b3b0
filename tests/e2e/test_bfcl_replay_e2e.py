"""The BFCL replay bench (bench/bfcl_replay.py) end to end on two dialogues: dialogue 0 is played as
learning traffic, dialogue 1 is measured, each through a real `toolweave serve` in front of the BFCL
backends served as real MCP servers. The replay must be faithful (every gold call succeeds through the
gateway with the result direct execution gives), the gateway's own audit log must show those calls in one
session per dialogue, and the figures must be the metrics of the lists the gateway answered."""

from __future__ import annotations

import ast
import importlib.util
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from toolweave.records import make_tool_id
from toolweave.retrieval.metrics import summarize

pytestmark = [pytest.mark.integration]

REPO = Path(__file__).resolve().parents[2]
RUNNER = REPO / "bench" / "bfcl_replay.py"
VARIANT = "warm-inferred-grtf"


def gold_calls(folder: Path, number: int) -> tuple[dict[str, Any], list[str]]:
    """The dialogue ``multi_turn_base_<number>`` and its gold calls' published names, in order: each
    ``<source>__<function>``, the source being the one the runner serves the function's class as."""
    spec = importlib.util.spec_from_file_location("bfcl_servers", REPO / "bench" / "bfcl_servers.py")
    assert spec is not None and spec.loader is not None
    servers = sys.modules.setdefault("bfcl_servers", importlib.util.module_from_spec(spec))
    spec.loader.exec_module(servers)  # registered first: its dataclasses look their module up
    class_of = {}
    for line in (folder / "tools.jsonl").read_text(encoding="utf-8").splitlines():
        tool = json.loads(line)
        class_of[tool["name"]] = tool["class"]
    for line in (folder / "dialogues.jsonl").read_text(encoding="utf-8").splitlines():
        dialogue = json.loads(line)
        if dialogue["id"] == f"multi_turn_base_{number}":
            names = [called(c) for turn in dialogue["ground_truth"] for c in turn]
            return dialogue, [make_tool_id(servers.BACKENDS[class_of[n]][0], n) for n in names]
    raise AssertionError(f"no dialogue {number}")


def called(call: str) -> str:
    """The function a gold call string calls: ``cd(folder='document')`` → ``cd``."""
    node = ast.parse(call, mode="eval").body
    assert isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
    return node.func.id


def audit(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def test_two_dialogues_are_replayed_faithfully_and_scored_from_the_gateways_answers(
    tmp_path: Path, dataset_dir: Callable[[str], Path]
) -> None:
    folder = dataset_dir("bfcl_multi_turn")
    pytest.importorskip("mpmath", reason="BFCL's MathAPI backend needs mpmath: pip install -e '.[bench]'")
    learning, learning_calls = gold_calls(folder, 0)
    measured, measured_calls = gold_calls(folder, 1)
    work = tmp_path / "work"
    done = subprocess.run(
        [
            sys.executable,
            str(RUNNER),
            "--dialogues",
            "0,1",
            "--phases",
            "warm",
            "--graphs",
            "inferred",
            "--methods",
            "grtf",
            "--no-offline",
            "--no-probe",
            "--json",
            "--details",
            "--keep",
            str(work),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    report = json.loads(done.stdout)

    # Faithful: every gold call succeeded through the gateway, with the result of direct execution.
    faithful = report["variants"][VARIANT]["faithful"]
    for figures, calls in ((report["learning"], learning_calls), (faithful, measured_calls)):
        assert figures["calls"] == len(calls) > 0
        assert figures["succeeded"] == figures["identical"] == len(calls), figures

    # The gateway's own record: each dialogue's gold calls, in order, answered ok, all in one session
    # with that dialogue's find_tools turns (the readiness checks are other sessions, and not ok).
    for label, dialogue, calls in (
        ("learning", learning, learning_calls),
        (VARIANT, measured, measured_calls),
    ):
        lines = audit(work / f"{label}.audit.jsonl")
        ok_calls = [a for a in lines if a["kind"] == "call" and a["outcome"] == "ok"]
        assert [a["tool"] for a in ok_calls] == calls
        [session] = {a["session"] for a in ok_calls}
        turns = [a for a in lines if a["kind"] == "find_tools" and a["session"] == session]
        assert len(turns) == len(dialogue["turns"])

    # The figures are the metrics of what the gateway answered, recorded turn by turn and call by call.
    variant = report["variants"][VARIANT]
    details = report["details"][VARIANT]
    scored = [t for t in details["turns"] if t["gold"]]
    assert len(scored) == len(measured["turns"]) == variant["retrieval"]["queries"]
    catalogue = {json.loads(line)["name"] for line in (folder / "tools.jsonl").read_text().splitlines()}
    assert all(0 < len(t["ranked"]) <= 10 and set(t["ranked"]) <= catalogue for t in scored)
    expected = summarize(
        [(t["ranked"], t["gold"]) for t in scored], (5, 10), [t["published"] for t in scored]
    )
    for key in ("map@10", "recall@5", "complete@10"):
        assert variant["retrieval"][key] == pytest.approx(expected[key])
    calls = details["calls"]
    assert [c["tool"] for c in calls] == [name.split("__", 1)[1] for name in measured_calls]
    assert all((c["via"] == "direct") == c["published"] for c in calls)
    assert variant["published"]["already_published"] == sum(c["published"] for c in calls)
    assert variant["published"]["list_mismatch"] == sum(c["published"] != c["listed"] for c in calls)
    # the published set at each call: registry tools only, the called tool among them when published, and
    # the tools the dialogue's gold calls use a part of it
    assert all(c["list_size"] >= c["list_needed"] >= int(c["published"]) for c in calls)
    sizes = [c["list_size"] for c in calls]
    assert variant["published"]["set_size_mean"] == pytest.approx(sum(sizes) / len(sizes))
    assert 0 < variant["published"]["set_precision"] <= 1
