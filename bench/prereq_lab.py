"""Walking edges with the trust their origin earns, on ``walk_lab`` recordings.

    .venv/bin/python bench/walk_lab.py record api_bank openapi_links ...   # once
    .venv/bin/python bench/prereq_lab.py [DATASET ...] [--with-test]

Each variant is the shipped walk with different rules per edge origin: ``sure`` edges (declared, manifest,
learned: someone's word or what traffic showed) and ``inferred`` ones (names and schemas). Knobs per
group: the weight below which a dependency is not walked, the ``1/n`` share among one parameter's
producers, and (inferred only) the path-confidence cut. Printed per dataset, set and graph: mAP@10 and
Complete@10 of hybrid, the paper's walk and each variant, and the walked tools in the top 10.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields, replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from walk_lab import DATASETS, Recording, hybrid, load, per_set, scores
from walk_variants import PAPER, SHIPPED, LabChooser, LabPolicy, walker

from toolweave.records import DependencyEdge
from toolweave.retrieval.walk import Choice

SURE_ORIGINS = frozenset({"declared", "manifest", "learned"})


@dataclass(frozen=True)
class TrustPolicy(LabPolicy):
    """The lab's policy for inferred edges; ``sure`` for declared, manifest and learned ones."""

    sure: LabPolicy | None = None

    def chooser(self, seen: set[str], relevance: Mapping[str, float]) -> Choice:
        base = LabPolicy(**{f.name: getattr(self, f.name) for f in fields(LabPolicy)})
        inferred = LabChooser(base, seen, relevance)
        sure = LabChooser(self.sure or base, seen, relevance)
        sure.path_confidence = inferred.path_confidence  # one walk: one record of how each tool was reached

        def choose(
            tool: str, edges: Sequence[DependencyEdge], weight: float
        ) -> list[tuple[DependencyEdge, float]]:
            mine = [e for e in edges if e.origin in SURE_ORIGINS]
            theirs = [e for e in edges if e.origin not in SURE_ORIGINS]
            picked = {id(e): w for e, w in [*sure(tool, mine, weight), *inferred(tool, theirs, weight)]}
            return [(e, picked[id(e)]) for e in edges if id(e) in picked]

        return choose


PAPER_TRUST = replace(SHIPPED, min_weight=0.0, alternatives_power=0.0)
VARIANTS: dict[str, LabPolicy] = {
    "shipped": SHIPPED,
    "sure: no weight cut": TrustPolicy(sure=replace(SHIPPED, min_weight=0.0)),
    "sure: no weight cut, no share": TrustPolicy(sure=PAPER_TRUST),
    "sure: weight cut 0.2": TrustPolicy(sure=replace(SHIPPED, min_weight=0.2)),
    "inferred: no path cut, weight 0.3": replace(SHIPPED, min_confidence=0.0, min_weight=0.3),
    "inferred: no path cut, weight 0.2": replace(SHIPPED, min_confidence=0.0, min_weight=0.2),
    **{
        f"inferred only: no path cut, weight {w}": TrustPolicy(min_confidence=0.0, min_weight=w, sure=SHIPPED)
        for w in (0.1, 0.2, 0.25, 0.3, 0.35)
    },
}


def main() -> None:
    import walk_lab

    import __main__

    # the recordings were pickled by walk_lab run as a script: their classes are ``__main__``'s there
    __main__.Query, __main__.Recording = walk_lab.Query, walk_lab.Recording
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("datasets", nargs="*", default=DATASETS)
    parser.add_argument("--with-test", action="store_true", help="ToolLinkOS test split too (judge only)")
    args = parser.parse_args()
    for name in args.datasets:
        try:
            rec: Recording = load(name)
        except FileNotFoundError:
            print(f"{name}: not recorded", file=sys.stderr)
            continue
        base = scores(rec, "declared", hybrid)
        for graph, edges in rec.graphs.items():
            if not any(edges.values()):
                continue
            runs = {"paper": scores(rec, graph, walker(PAPER))}
            runs.update({label: scores(rec, graph, walker(p)) for label, p in VARIANTS.items()})
            for set_label, h in per_set(rec, base, args.with_test).items():
                row: dict[str, object] = {"dataset": name, "set": set_label, "graph": graph}
                row["hybrid"] = [round(h, 4), round(per_set(rec, base, args.with_test, 3)[set_label], 4)]
                for label, run in runs.items():
                    m = per_set(rec, run, args.with_test)[set_label]
                    c = per_set(rec, run, args.with_test, 3)[set_label]
                    walked = per_set(rec, run, args.with_test, 4)[set_label]
                    row[label] = [round(m, 4), round(c, 4), round(walked, 2)]
                print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
