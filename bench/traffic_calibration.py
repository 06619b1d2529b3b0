"""Choose the learned-edge constants on the BFCL learning half only (even dialogue ids).

    .venv/bin/python bench/traffic_calibration.py [--json]

The learning half is split in two folds (ids ≡ 0 and ≡ 2 mod 4). Each fold's gold calls, with the results
direct execution gives (what a faithful replay through the gateway hands back; failed calls dropped, as
the gateway reports only successes), are played through the gateway's own ``TrafficObserver``, one
session per dialogue and a ``find_tools`` turn before each user turn; the sightings are merged into
evidence rows and turned into edges by the registry's own code (``evidence``, ``learned.edge_evidence``).
The edges learned on one fold are scored against the other fold's value flow exactly as
``bench/bfcl_replay.py`` scores the measured half: precision of the parameter edges at the walk's bar
against the other fold's value-flow pairs, recall of those of its pairs seen in >= 2 dialogues of the
learning fold; sequence (tool) edges against the other fold's gold order. Both directions, for a grid of
``SESSION_DECAY`` and the string specificity scales. The measured half (odd ids) is never read.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from itertools import product
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import mcp_types as types
from bfcl_flow import CallRecord, FlowTable, adjacent_pairs
from bfcl_servers import DATASET, backend_classes, dataset_present, dialogue_calls, direct_results, read_jsonl

from toolweave.registry import evidence as evidence_module
from toolweave.registry.evidence import Evidence, EvidenceKey, merge_sightings
from toolweave.registry.learned import edge_evidence
from toolweave.server.calls import traffic as traffic_module
from toolweave.server.calls.traffic import TrafficObserver

BAR = 0.5  # Settings.infer_min_confidence: the walk's bar


def number_of(dialogue_id: str) -> int:
    return int(dialogue_id.split("-", 1)[0].rsplit("_", 1)[1])


def load_learning_half() -> list[tuple[str, list[list[Any]], list[list[dict[str, Any]]]]]:
    classes = backend_classes()
    out = []
    for raw in read_jsonl(DATASET / "dialogues.jsonl"):
        if number_of(raw["id"]) % 2:
            continue  # the measured half: never read here
        calls = dialogue_calls(raw, classes)
        out.append((raw["id"], calls, direct_results(raw, calls, classes)))
    return out


def play(dialogues: Sequence[Any]) -> tuple[dict[EvidenceKey, Evidence], FlowTable, Any]:
    """The evidence rows an observer gathers over ``dialogues``; their value flow and gold order."""
    observer = TrafficObserver()
    rows: dict[EvidenceKey, Evidence] = {}
    records: list[list[CallRecord]] = []
    order = []
    for dialogue_id, turns, results in dialogues:
        turn_counter = 0
        mine: list[CallRecord] = []
        for t, (calls, outputs) in enumerate(zip(turns, results, strict=True)):
            turn_counter += 1  # the turn's find_tools
            for i, (call, result) in enumerate(zip(calls, outputs, strict=True)):
                turn_counter += 1
                ok = not (isinstance(result, dict) and "error" in result)
                mine.append(CallRecord(call.tool, call.arguments, result if ok else None))
                order.append((dialogue_id, t, i, call.tool))
                if not ok:
                    continue
                answer = types.CallToolResult(content=[], structured_content=result)
                sightings = observer.observe(dialogue_id, call.tool, call.arguments, answer, turn_counter)
                merge_sightings(rows, sightings)
        records.append(mine)
    return rows, FlowTable.of(records), adjacent_pairs(order)


def score(
    rows: dict[EvidenceKey, Evidence], learn: FlowTable, other: FlowTable, other_order: Any
) -> dict[str, Any]:
    edges = [(row, c) for row, c in edge_evidence(rows) if c >= BAR]
    flow = [row for row, _ in edges if not row.is_sequence]
    sequence = [row for row, _ in edges if row.is_sequence]
    truth = set(other.count)
    learnable = {p for p in truth if learn.dialogues[p] >= 2}
    right = [r for r in flow if r.key in truth]
    found = {p for p in learnable if p in {r.key for r in flow}}
    seq_right = [r for r in sequence if other_order[(r.consumer, r.producer)] > 0]
    return {
        "edges": len(flow),
        "precision": len(right) / len(flow) if flow else None,
        "recall": len(found) / len(learnable) if learnable else None,
        "learnable": len(learnable),
        "sequence_edges": len(sequence),
        "sequence_precision": len(seq_right) / len(sequence) if sequence else None,
    }


@contextmanager
def constants(decay: float, lower: float, upper: float) -> Iterator[None]:
    saved = (evidence_module.SESSION_DECAY, traffic_module.WORD_FULL_AT, traffic_module.NAME_FULL_AT)
    evidence_module.SESSION_DECAY = decay
    traffic_module.WORD_FULL_AT, traffic_module.NAME_FULL_AT = lower, upper
    try:
        yield
    finally:
        evidence_module.SESSION_DECAY, traffic_module.WORD_FULL_AT, traffic_module.NAME_FULL_AT = saved


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if not dataset_present():
        print(f"skipped: {DATASET} is absent", file=sys.stderr)
        return 0
    dialogues = load_learning_half()
    folds = [
        [d for d in dialogues if number_of(d[0]) % 4 == 0],
        [d for d in dialogues if number_of(d[0]) % 4 == 2],
    ]
    results = []
    for decay, lower, upper in product((0.1, 0.25, 0.5), (12.0, 8.0), (12.0, 6.0, 4.0)):
        with constants(decay, lower, upper):
            played = [play(f) for f in folds]
            per_fold = [
                score(played[a][0], played[a][1], played[b][1], played[b][2]) for a, b in ((0, 1), (1, 0))
            ]
        results.append({"decay": decay, "word_full_at": lower, "name_full_at": upper, "folds": per_fold})
        cells = " | ".join(
            f"P {_f(s['precision'])} R {_f(s['recall'])} ({s['edges']} e, {s['learnable']} l) "
            f"seq {s['sequence_edges']} P {_f(s['sequence_precision'])}"
            for s in per_fold
        )
        print(f"decay {decay:<4} word {lower:<4} name {upper:<4} | {cells}", file=sys.stderr)
    if args.json:
        print(json.dumps(results, indent=2))
    return 0


def _f(x: float | None) -> str:
    return "  -  " if x is None else f"{x:.3f}"


if __name__ == "__main__":
    sys.exit(main())
