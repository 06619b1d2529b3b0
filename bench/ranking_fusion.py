"""Fusion candidates scored on the recorded first passes, and the leave-one-dataset-out choice (``lodo``).

The fusions compared here are not settings of the pipeline (only the shipped fleet fusion is): they
replay the recorded candidate lists outside ``retrieve``, so they live apart from the experiments that
go through it. ``_check_replay`` ties the two together: the shipped fusion's figures here must equal
the real pipeline's.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from functools import partial
from statistics import fmean

from fusion_variants import peak_fusion, rrf_fusion, weighted_zscore_fusion
from ranking_recording import DESIGN, OUT, Recording, evaluate, load

from toolweave.retrieval.fusion import (
    EQUAL_WEIGHTS,
    FLEET_POWER,
    FLEET_TOP_N,
    FleetCalibration,
    calibrate,
    fuse,
    zscore_fusion,
)
from toolweave.retrieval.metrics import average_precision, recall
from toolweave.retrieval.results import Hit
from toolweave.settings import RetrievalSettings

Fusion = Callable[[Sequence[Hit], Sequence[Hit]], list[Hit]]
FUSION_POOL = 30
"""Candidates per retriever the pipeline fuses (``pipeline._MIN_POOL``; checked against the real pipeline)."""


def combmnz(vector: Sequence[Hit], text: Sequence[Hit]) -> list[Hit]:
    """CombMNZ (Fox & Shaw 1994): sum of min-max normalised scores times the number of lists holding it."""
    fused: dict[str, float] = {}
    seen: dict[str, int] = {}
    for hits in (vector, text):
        if not hits:
            continue
        lo, hi = min(h.score for h in hits), max(h.score for h in hits)
        for h in hits:
            fused[h.tool_id] = fused.get(h.tool_id, 0.0) + ((h.score - lo) / (hi - lo) if hi > lo else 1.0)
            seen[h.tool_id] = seen.get(h.tool_id, 0) + 1
    order = {h.tool_id: n for n, h in reversed(list(enumerate([*vector, *text])))}
    ranked = sorted(fused, key=lambda i: (-fused[i] * seen[i], order[i]))
    return [Hit(i, fused[i] * seen[i]) for i in ranked]


def _same(fusion: Fusion) -> Callable[[], Fusion]:
    """A stateless fusion: every run gets the same one."""
    return lambda: fusion


def _running_fleet(top_n: int, power: float) -> Fusion:
    """A fresh running record per run (it learns from the turns it fuses)."""
    return RunningFleet(top_n=top_n, power=power).fuse


CANDIDATES: dict[str, list[tuple[str, Callable[[], Fusion]]]] = {
    # family → (label, a fresh fusion per dataset: ``fleet`` learns from the turns it has seen); a
    # family's constants are chosen by the protocol (``lodo``), never per dataset
    "bm25": [("bm25", lambda: lambda v, t: list(t))],
    "vector": [("vector", lambda: lambda v, t: list(v))],
    "zscore": [("zscore", lambda: zscore_fusion)],
    "combmnz": [("combmnz", lambda: combmnz)],
    "rrf": [(f"rrf k={k}", _same(partial(rrf_fusion, k=k))) for k in (1, 3, 10, 30, 60)],
    "text weight": [
        (f"zscore, bm25 weight {w}", _same(partial(weighted_zscore_fusion, text_weight=w)))
        for w in (0.8, 1.2, 1.5)
    ],
    "peak": [
        (f"peak n={n} p={p}", _same(partial(peak_fusion, top_n=n, power=p)))
        for n in (1, 3, 5)
        for p in (0.5, 1.0, 1.5, 2.0)
    ],
    "fleet": [(f"fleet n={n} p={p}", partial(_running_fleet, n, p)) for n in (1, 3) for p in (1.0, 2.0, 3.0)],
}
SINGLE_RETRIEVERS = ("bm25", "vector")


class RunningFleet:
    """The fleet calibration learned prequentially from the turns so far (equal weights for the first
    ``warm_up``), as the product did until it computed one per snapshot from probes of its own tools."""

    def __init__(self, top_n: int = FLEET_TOP_N, power: float = FLEET_POWER, warm_up: int = 20) -> None:
        self.top_n, self.power, self.warm_up = top_n, power, warm_up
        self.turns, self.vector_peak, self.text_peak = 0, 0.0, 0.0

    def fuse(self, vector: Sequence[Hit], text: Sequence[Hit]) -> list[Hit]:
        turn = calibrate([(vector, text)], self.top_n, self.power)
        self.turns += 1
        self.vector_peak += (turn.vector_peak - self.vector_peak) / self.turns
        self.text_peak += (turn.text_peak - self.text_peak) / self.turns
        record = FleetCalibration(self.vector_peak, self.text_peak, self.power)
        return fuse(vector, text, record if self.turns >= self.warm_up else EQUAL_WEIGHTS)


Stream = list[tuple[str, list[Hit], list[Hit], tuple[str, ...]]]


def query_stream(rec: Recording) -> Stream:
    """(``set`` or ``set/split``, vector hits, text hits, gold ids) for every query, in the order
    ``toolweave bench NAME`` asks them (query sets in turn, each in file order)."""
    ids = {name: tool_id for tool_id, name in rec.names.items()}
    stream: Stream = []
    for set_name, queries in rec.queries.items():
        for text, gold, split in queries:
            vector, text_hits = rec.hits[(text,)]
            label = f"{set_name}/{split}" if split and rec.name in DESIGN else set_name
            stream.append((label, vector[:FUSION_POOL], text_hits[:FUSION_POOL], tuple(ids[g] for g in gold)))
    return stream


def first_pass_metrics(stream: Stream, fusion: Fusion) -> dict[str, dict[str, float]]:
    """mAP@10, R@5 and R@10 of the fused first pass (= ``hybrid``'s ranked list) per set."""
    scored: dict[str, list[tuple[float, float, float]]] = {}
    for label, v, t, gold in stream:
        ranked = [h.tool_id for h in fusion(v, t)[:10]]
        ap, r5, r10 = average_precision(ranked, gold, 10), recall(ranked, gold, 5), recall(ranked, gold, 10)
        scored.setdefault(label, []).append((ap, r5, r10))
    return {
        label: {
            "map@10": fmean(r[0] for r in rows),
            "recall@5": fmean(r[1] for r in rows),
            "recall@10": fmean(r[2] for r in rows),
            "queries": len(rows),
        }
        for label, rows in scored.items()
    }


def _design_score(figures: dict[str, dict[str, float]]) -> float:
    """A dataset's figure for choosing: mean mAP@10 over its query sets, ToolLinkOS ``test`` left out."""
    return fmean(m["map@10"] for label, m in figures.items() if not label.endswith("/test"))


def _check_replay(rec: Recording, figures: dict[str, dict[str, float]]) -> None:
    """The lab's figures of the shipped fusion must equal the real pipeline's (``retrieve``, method
    hybrid, name match off: the candidates here are fused lists alone)."""
    settings = RetrievalSettings(method="hybrid", name_match=0.0)
    for set_name, m in evaluate(rec, settings, "none").items():
        parts = [f for label, f in figures.items() if label.split("/")[0] == set_name]
        pooled = sum(f["map@10"] * f["queries"] for f in parts) / sum(f["queries"] for f in parts)
        if abs(pooled - m["map@10"]) > 1e-9:
            raise SystemExit(f"fleet: replay differs from the pipeline on {rec.name}/{set_name}")


def lodo(names: list[str]) -> None:
    """Every fusion candidate on every dataset, then two protocols for choosing among them:

    - *one design set*: the candidate (family and constants) best on ToolLinkOS ``examples``;
    - *leave one dataset out*: for each dataset, the candidate best on the mean of the *other* datasets
      (each dataset weighs the same; ToolLinkOS counts with ``examples`` only), judged on the one left out.

    ``test`` of ToolLinkOS is reported, never chosen on. Each dataset's queries are replayed in the order
    ``toolweave bench`` asks them, through one fusion instance (``fleet`` learns as it goes); the
    shipped ``fleet`` rows are checked against the real pipeline.
    """
    figures: dict[str, dict[str, dict[str, dict[str, float]]]] = {}  # candidate → dataset → set → metrics
    for name in names:
        rec = load(name)
        stream = query_stream(rec)
        for family in CANDIDATES.values():
            for label, make in family:
                figures.setdefault(label, {})[name] = first_pass_metrics(stream, make())
                for set_label, m in figures[label][name].items():
                    print(json.dumps({"dataset": name, "set": set_label, "fusion": label, **m}), flush=True)
        _check_replay(rec, figures[f"fleet n={FLEET_TOP_N} p={FLEET_POWER}"][name])
    fusions = [label for fam, fs in CANDIDATES.items() if fam not in SINGLE_RETRIEVERS for label, _ in fs]
    design = {c: figures[c]["toollinkos"]["instances/examples"]["map@10"] for c in fusions}
    chosen_once = max(fusions, key=lambda c: (design[c], c == "zscore"))
    print(json.dumps({"protocol": "one design set (ToolLinkOS examples)", "chosen": chosen_once}))
    for held_out in names:
        others = [n for n in names if n != held_out]
        chosen = max(fusions, key=lambda c: fmean(_design_score(figures[c][n]) for n in others))
        for set_label in figures[chosen][held_out]:
            row = {
                "protocol": "leave one dataset out",
                "held_out": held_out,
                "set": set_label,
                "chosen": chosen,
                **{
                    c: round(figures[c][held_out][set_label]["map@10"], 4)
                    for c in (chosen, chosen_once, "zscore", "bm25", "vector")
                },
                "recall@5": round(figures[chosen][held_out][set_label]["recall@5"], 4),
            }
            print(json.dumps(row), flush=True)
    everywhere = max(fusions, key=lambda c: fmean(_design_score(figures[c][n]) for n in names))
    print(json.dumps({"protocol": "all datasets (the constant to ship)", "chosen": everywhere}))
    with (OUT / "lodo.json").open("w") as f:
        json.dump(figures, f)
