"""Ranking experiments (fusion, walk order, relevance floor) on recorded first passes.

    .venv/bin/python bench/ranking_lab.py record toollinkos api_bank metatool seal_tools
    .venv/bin/python bench/ranking_lab.py run                # every experiment, JSON lines + tables
    .venv/bin/python bench/ranking_lab.py lodo               # fusion candidates, leave-one-dataset-out
    .venv/bin/python bench/ranking_lab.py walk [--with-test]  # walk orderings
    .venv/bin/python bench/ranking_lab.py decompose [--with-test]  # query decomposition
    .venv/bin/python bench/ranking_lab.py decompose --grid weighted   # parts weighted by confidence
    .venv/bin/python bench/ranking_lab.py decompose-lodo --rows bench/out/lab/decompose-weighted-*.json
    .venv/bin/python bench/ranking_lab.py decompose-latency toollinkos --variant "and w>=3 max"

``record`` builds each dataset's registry once (embeddings from the disk cache), records every query's
vector and full-text candidates and both dependency graphs (declared; inferred at ingest by the
product's own rules) into bench/out/lab/NAME.pkl. ``run`` replays them through the real pipeline
(``toolweave.retrieval.retrieve``) under each setting: seconds per variant instead of minutes. Fusions
and walk orderings that are not shipped come from ``fusion_variants.py`` and ``walk_orderings.py``.
Design splits: ToolLinkOS ``examples`` and Seal-Tools ``dev``; everything else is out-of-sample.
``lodo`` scores every fusion candidate's first pass (hybrid) and chooses constants leave-one-dataset-out
(see ``lodo``); ToolLinkOS ``test`` is reported, never chosen on. ``walk`` replays every walk ordering
(``WALK_VARIANTS``) over both graphs; its design split is ToolLinkOS ``examples`` alone.

Each experiment lives in its own module beside this entry point: the recordings and their replay in
``ranking_recording.py``, the fusion candidates and ``lodo`` in ``ranking_fusion.py``, the walk orderings
in ``ranking_walk.py``, decomposition in ``ranking_decompose.py``; ``run`` (the pipeline's own settings)
and the command line stay here.
"""

from __future__ import annotations

import argparse
import json
import pickle
import sys
from pathlib import Path

from toolweave.benchmark.embedding_cache import CachedEmbedder
from toolweave.registry import Embedder
from toolweave.settings import RetrievalSettings

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ranking_decompose import GRIDS, decompose, decompose_latency, decompose_lodo
from ranking_fusion import lodo
from ranking_recording import DESIGN, OUT, Recording, evaluate, load, record
from ranking_walk import walk

__all__ = ["Recording"]  # recordings pickled by this script before the split name ``__main__.Recording``


EXPERIMENTS: dict[str, list[tuple[str, dict[str, object]]]] = {
    # (graph, settings) per variant; method first
    # fusions other than the shipped one are compared on the first pass by ``lodo`` (they are no
    # longer settings of the pipeline); ``order`` lives in ``walk`` (bench/walk_orderings.py)
    "methods": [
        ("none", {"method": "bm25"}),
        ("none", {"method": "vector"}),
        ("none", {"method": "hybrid"}),
        ("declared", {"method": "grtf"}),
        ("inferred", {"method": "grtf"}),
    ],
    "floor": [
        (g, {"method": m, "floor_relative": r, "floor_absolute": a})
        for r in (0.0, 0.3, 0.4, 0.5, 0.6, 0.7)
        for a in (0.0, 0.2, 0.3)
        for m, g in (("hybrid", "none"), ("grtf", "declared"))
    ],
}


def run(names: list[str], experiment: str, base: dict[str, object]) -> None:
    for name in names:
        rec = load(name)
        splits: list[str | None] = [None, DESIGN[name]] if name in DESIGN else [None]
        if name == "toollinkos":
            splits.append("test")
        if name == "seal_tools":
            splits.append("test_in_domain")
        for graph, params in EXPERIMENTS[experiment]:
            settings = RetrievalSettings.model_validate({**base, **params})
            for split in splits:
                for set_name, m in evaluate(rec, settings, graph, split=split).items():
                    row = {
                        "dataset": name,
                        "set": set_name,
                        "split": split or "all",
                        "in_sample": split is not None and split == DESIGN.get(name),
                        "graph": graph,
                        **{k: v for k, v in params.items()},
                        **{k: round(v, 4) for k, v in m.items() if k.endswith(("@5", "@10")) or "@" not in k},
                    }
                    print(json.dumps(row), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "command",
        choices=["record", "run", "lodo", "walk", "decompose", "decompose-lodo", "decompose-latency"],
    )
    parser.add_argument("--rows", action="append", default=[], help="decompose-lodo: decompose JSON files")
    parser.add_argument("--variant", action="append", default=[], help="decompose-latency: grid labels")
    parser.add_argument(
        "datasets", nargs="*", default=["toollinkos", "api_bank", "metatool", "seal_tools", "openapi_links"]
    )
    parser.add_argument("--grid", default="flat", choices=sorted(GRIDS), help="decompose: which grid")
    parser.add_argument("--exp", default="methods", choices=sorted(EXPERIMENTS))
    parser.add_argument("--base", default="{}", help="JSON settings under every variant")
    parser.add_argument("--every", type=int, default=1, help="sample large query sets (see SAMPLE_ABOVE)")
    parser.add_argument(
        "--with-test", action="store_true", help="walk, decompose: score ToolLinkOS test too (once)"
    )
    args = parser.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    if args.command == "run":
        run(args.datasets, args.exp, json.loads(args.base))
        return
    if args.command == "lodo":
        lodo(args.datasets)
        return
    if args.command == "walk":
        walk(args.datasets, args.with_test)
        return
    if args.command == "decompose":
        decompose(args.datasets, args.with_test, args.grid)
        return
    if args.command == "decompose-lodo":
        decompose_lodo([Path(p) for p in args.rows])
        return
    if args.command == "decompose-latency":
        decompose_latency(args.datasets[0], args.variant)
        return
    embedder = CachedEmbedder(Embedder())
    for name in args.datasets:
        rec = record(name, embedder, args.every)
        with (OUT / f"{name}.pkl").open("wb") as f:
            pickle.dump(rec, f)
        print(json.dumps({"recorded": name, "cache_hits": embedder.hits, "misses": embedder.misses}))


if __name__ == "__main__":
    main()
