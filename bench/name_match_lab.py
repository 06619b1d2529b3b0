"""Name match weight (``retrieval.name_match``), chosen leave-one-dataset-out on recorded first passes.

    .venv/bin/python bench/ranking_lab.py record toollinkos api_bank metatool seal_tools openapi_links
    .venv/bin/python bench/name_match_lab.py              # the grid, JSON lines, then the folds
    .venv/bin/python bench/name_match_lab.py --with-test  # + ToolLinkOS ``test``, scored after the choice

Replays each recording (whole queries: the recordings hold no sub-queries) through the real pipeline
with grtf, once per weight, on the design units: API-Bank, OpenAPI-links (declared and inferred
graphs), ToolLinkOS ``examples`` (both graphs), Seal-Tools ``dev``, MetaTool multi and single (sampled
as recorded). A fold keeps the weights that cost none of its units more than ``DO_NO_HARM`` and takes
the best mean gain (``ranking_decompose._fold_choice``); the held-out dataset's change under that pick is
its out-of-sample figure. ToolLinkOS ``test`` is never a unit.
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from typing import Any

from ranking_decompose import DO_NO_HARM, _fold_choice
from ranking_recording import Recording, evaluate, load

from toolweave.settings import RetrievalSettings

__all__ = ["Recording"]  # recordings pickled by ranking_lab (before its split) name __main__.Recording

WEIGHTS = (0.0, 0.25, 0.5, 1.0, 1.5, 2.0, 3.0)
UNITS: list[tuple[str, str, str | None, str]] = [  # dataset, query set, split (None: all), graph
    ("api_bank", "queries", None, "inferred"),
    ("openapi_links", "queries", None, "declared"),
    ("openapi_links", "queries", None, "inferred"),
    ("toollinkos", "instances", "examples", "declared"),
    ("toollinkos", "instances", "examples", "inferred"),
    ("seal_tools", "queries", "dev", "inferred"),
    ("metatool", "queries_multi", None, "declared"),
    ("metatool", "queries_single", None, "declared"),
]
TEST_UNITS: list[tuple[str, str, str | None, str]] = [
    ("toollinkos", "instances", "test", "declared"),
    ("toollinkos", "instances", "test", "inferred"),
]


def grid(units: list[tuple[str, str, str | None, str]]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for dataset in dict.fromkeys(u[0] for u in units):
        rec = load(dataset)
        for weight in WEIGHTS:
            for _, query_set, split, graph in (u for u in units if u[0] == dataset):
                params = RetrievalSettings(method="grtf", name_match=weight)
                metrics = evaluate(rec, params, graph, split=split)[query_set]
                row = {
                    "dataset": dataset,
                    "set": query_set,
                    "split": split or "all",
                    "graph": graph,
                    "name_match": weight,
                    "map@10": round(metrics["map@10"], 4),
                    "recall@5": round(metrics["recall@5"], 4),
                }
                print(json.dumps(row), flush=True)
                rows.append(row)
    return rows


def folds(rows: list[dict[str, Any]]) -> None:
    """Each dataset left out in turn: the weight the others choose, and what it does to the one left out."""
    base = {
        (r["dataset"], r["set"], r["split"], r["graph"]): r["map@10"] for r in rows if r["name_match"] == 0
    }
    deltas: dict[str, dict[str, dict[tuple[str, str], float]]] = defaultdict(lambda: defaultdict(dict))
    for r in rows:
        key = (r["dataset"], r["set"], r["split"], r["graph"])
        if r["name_match"] != 0 and key in base:
            unit = (f"{r['set']}/{r['split']}", str(r["graph"]))
            deltas[f"name_match {r['name_match']}"][str(r["dataset"])][unit] = r["map@10"] - base[key]
    datasets = sorted({u[0] for u in UNITS})
    for held_out in [*datasets, None]:
        chosen, score = _fold_choice(deltas, [n for n in datasets if n != held_out])
        judged = deltas[chosen][held_out] if held_out and chosen in deltas else {}
        print(
            json.dumps(
                {
                    "held_out": held_out or "(none: the pick on all)",
                    "chosen": chosen,
                    "design_mean_gain": round(score, 4),
                    "held_out_change": {f"{u}/{g}": round(d, 4) for (u, g), d in judged.items()},
                    "guard": DO_NO_HARM,
                }
            )
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--with-test", action="store_true", help="also score ToolLinkOS test (never chosen on)"
    )
    ns = parser.parse_args()
    rows = grid(UNITS)
    folds(rows)
    if ns.with_test:
        grid(TEST_UNITS)


if __name__ == "__main__":
    main()
