"""Walk orderings (``walk``): every variant of the dependency walk over the recorded first passes.

The orderings come from ``walk_orderings.py`` and start from the pipeline's own first pass; this module
holds the grid and its scoring, apart from the fusion and decomposition experiments, which vary other
stages. ``_check_walk_replay`` ties the lab to the product: the paper's walk over the lab's first passes
must equal ``retrieve`` query by query.
"""

from __future__ import annotations

import json
from statistics import fmean
from typing import Any

from ranking_recording import DESIGN, OUT, Recording, load
from walk_orderings import expand_with_ordering

from toolweave.benchmark.recorded import RecordedGraph, RecordedIndex
from toolweave.records import DependencyEdge
from toolweave.retrieval import retrieve
from toolweave.retrieval.fusion import turn_relevance
from toolweave.retrieval.metrics import average_precision, recall
from toolweave.retrieval.pipeline import scored_first_pass
from toolweave.retrieval.query import contextual_query
from toolweave.retrieval.results import Hit
from toolweave.retrieval.walk import expand_with_dependencies
from toolweave.settings import RetrievalSettings

WalkVariant = tuple[str, dict[str, Any], float | None]
"""(label, ``expand_with_ordering`` keywords, every edge's confidence replaced by this or None)."""

WALK_VARIANTS: list[WalkVariant] = [
    ("dfs (paper)", {}, None),
    ("weighted: edge confidence", {"order": "weighted"}, None),
    *[
        (f"share {s}", {"dependency_share": s}, None)
        for s in (0.99, 0.97, 0.95, 0.9, 0.85, 0.8, 0.7, 0.5, 0.0)
    ],
    *[(f"gate {g}", {"walk_gate": g}, None) for g in (0.5, 0.7, 0.8, 0.9, 0.95)],
    *[(f"per hop {d}", {"order": "weighted"}, d) for d in (0.95, 0.9, 0.8)],
    *[
        (f"share {s} + gate {g}", {"dependency_share": s, "walk_gate": g}, None)
        for s in (0.95, 0.9, 0.8)
        for g in (0.8, 0.9)
    ],
    *[(f"k={k} gate {g}", {"top_k": k, "walk_gate": g}, None) for k in (5, 10) for g in (0.9, 0.95)],
    *[(f"hold {h}", {"hold_hits": h}, None) for h in (0.95, 0.9, 0.8, 0.7, 0.6, 0.5)],
]
"""The grid: the relevance-relative share of a hit that its dependencies weigh, a gate on which hits are
walked (adaptive k, also upward), a per-hop discount, combinations, and (added after the first rows on
ToolLinkOS ``examples``, the design split) held hits: strong search hits the walk cannot push out."""

WALK_GRAPHS = ("declared", "inferred")

Pass = tuple[str, str | None, list[Hit], tuple[str, ...]]
"""(query set, split, fused first pass, gold names) of one query."""


def _first_passes(rec: Recording, params: RetrievalSettings) -> list[Pass]:
    """Every query's ``Pass``, in the order ``toolweave bench`` asks them, through the pipeline's own
    first pass (``fleet`` learns as it goes, as in ``retrieve``)."""
    index = RecordedIndex(records=rec.records, hits=rec.hits)
    pool = max(params.final_k, params.top_k)
    out: list[Pass] = []
    for set_name, queries in rec.queries.items():
        for text, gold, split in queries:
            ((hits, _cosine),) = scored_first_pass(
                [contextual_query(text, ())],
                index,
                "grtf",
                pool,
                (),
                params.name_match,
            )
            out.append((set_name, split, hits, gold))
    return out


def _with_confidence(graph: dict[str, list[DependencyEdge]], confidence: float) -> RecordedGraph:
    return RecordedGraph(
        {t: [e.model_copy(update={"confidence": confidence}) for e in es] for t, es in graph.items()}
    )


def walk(names: list[str], with_test: bool = False) -> None:
    """Every walk variant × graph on each dataset's recorded first passes; the paper's DFS is checked
    query by query against the real pipeline (``retrieve``, method grtf, defaults). ToolLinkOS ``test``
    (and ``all``, which holds it) is scored only with ``with_test``: once, after the choice."""
    params = RetrievalSettings()
    rows = []
    for name in names:
        rec = load(name)
        passes = _first_passes(rec, params)
        for graph in WALK_GRAPHS:
            deps = RecordedGraph(rec.graphs.get(graph, {}))
            _check_walk_replay(rec, passes, deps, params)
            for label, kwargs, confidence in WALK_VARIANTS:
                lookup = (
                    deps if confidence is None else _with_confidence(rec.graphs.get(graph, {}), confidence)
                )
                scored: dict[tuple[str, str], list[tuple[float, float, float]]] = {}
                for set_name, split, hits, gold in passes:
                    options = {"top_k": params.top_k, "final_k": params.final_k, **kwargs}
                    ranked = expand_with_ordering(hits, lookup, **options)
                    names_ = [rec.names[r.tool_id] for r in ranked]
                    m = (
                        average_precision(names_, gold, 10),
                        recall(names_, gold, 10),
                        recall(names_, gold, 5),
                    )
                    for key in {(set_name, "all"), (set_name, split or "all")}:
                        scored.setdefault(key, []).append(m)
                for (set_name, split), ms in scored.items():
                    if name == "toollinkos" and split != DESIGN[name] and not with_test:
                        continue
                    row = {
                        "dataset": name,
                        "set": set_name,
                        "split": split,
                        "in_sample": name == "toollinkos" and split == "examples",
                        "graph": graph,
                        "variant": label,
                        "map@10": round(fmean(m[0] for m in ms), 6),
                        "recall@10": round(fmean(m[1] for m in ms), 6),
                        "recall@5": round(fmean(m[2] for m in ms), 6),
                        "queries": len(ms),
                    }
                    rows.append(row)
                    print(json.dumps(row), flush=True)
    with (OUT / ("walk-with-test.json" if with_test else "walk.json")).open("w") as f:
        json.dump(rows, f)


def _check_walk_replay(
    rec: Recording, passes: list[Pass], deps: RecordedGraph, params: RetrievalSettings
) -> None:
    """The lab's first passes must feed the walk as the real pipeline does: the product's walk over them
    equals ``retrieve``, query by query (whole queries: the lab's passes are not decomposed). The
    orderings measured here start from the paper's walk (``expand_with_ordering``, every option off),
    which ``bench/walk_lab.py check`` compares with ``WalkPolicy.everything()``."""
    params = params.model_copy(update={"decompose": "off"})
    index = RecordedIndex(records=rec.records, hits=rec.hits)
    texts = [q[0] for qs in rec.queries.values() for q in qs]
    for text, (_set, _split, hits, _gold) in zip(texts, passes, strict=True):
        real = [r.tool_id for r in retrieve(text, index, deps, params)]
        walked = expand_with_dependencies(
            hits, deps, top_k=params.top_k, final_k=params.final_k, relevance=turn_relevance(hits)
        )
        lab = [r.tool_id for r in walked]
        if real != lab:
            raise SystemExit(f"walk replay differs from the pipeline on {rec.name}: {text!r}")
