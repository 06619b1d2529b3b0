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
"""

from __future__ import annotations

import argparse
import json
import pickle
import resource
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from statistics import fmean
from typing import Any

from toolweave.benchmark import load_dataset
from toolweave.benchmark.embedding_cache import CachedEmbedder
from toolweave.benchmark.recorded import RecordedGraph, RecordedIndex
from toolweave.records import DependencyEdge, ToolRecord
from toolweave.registry import Embedder, Registry
from toolweave.retrieval import retrieve, retrieve_tools
from toolweave.retrieval.decompose import Decomposition
from toolweave.retrieval.fusion import (
    EQUAL_WEIGHTS,
    FLEET_POWER,
    FLEET_TOP_N,
    FleetCalibration,
    calibrate,
    fuse,
    turn_relevance,
    zscore_fusion,
)
from toolweave.retrieval.metrics import average_precision, recall, summarize
from toolweave.retrieval.pipeline import scored_first_pass
from toolweave.retrieval.query import clean_query, contextual_query
from toolweave.retrieval.results import Hit
from toolweave.retrieval.walk import expand_with_dependencies
from toolweave.settings import RetrievalSettings, Settings

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fusion_variants import peak_fusion, rrf_fusion, weighted_zscore_fusion
from labs.decompose_variants import LabDecomposition, PartWeighting, VariantFusion
from walk_orderings import expand_with_ordering

OUT = Path(__file__).parent / "out" / "lab"
DESIGN = {"toollinkos": "examples", "seal_tools": "dev"}
"""The only splits a choice may be made on."""


@dataclass
class Recording:
    name: str
    queries: dict[str, list[tuple[str, tuple[str, ...], str | None]]]
    """Query set → (text, gold names, split)."""
    hits: dict[tuple[str, ...], tuple[list[Hit], list[Hit]]]
    names: dict[str, str]
    records: dict[str, ToolRecord]
    graphs: dict[str, dict[str, list[DependencyEdge]]]
    """``declared`` / ``inferred`` → tool id → edges."""


SAMPLE_ABOVE = 5000
"""Query sets larger than this are sampled (every ``--every``-th query): MetaTool single has 20,563."""


def record(name: str, embedder: Embedder, every: int = 1) -> Recording:
    data = load_dataset(name)
    for set_name, qs in data.query_sets.items():
        if len(qs) > SAMPLE_ABOVE and every > 1:
            data.query_sets[set_name] = qs[::every]
    graphs: dict[str, dict[str, list[DependencyEdge]]] = {}
    hits: dict[tuple[str, ...], tuple[list[Hit], list[Hit]]] = {}
    with tempfile.TemporaryDirectory(prefix="toolweave-lab-") as tmp:
        for graph in ("declared", "inferred"):
            settings = Settings(infer_dependencies=graph == "inferred")
            reg = Registry.open(Path(tmp) / graph, embedder=embedder, settings=settings)
            t0 = time.perf_counter()
            reg.ingest(data.name, data.tools, data.edges if graph == "declared" else [])
            print(f"{name}: {graph} registry in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
            graphs[graph] = {t.id: reg.dependencies(t.id) for t in reg.tools()}
            if graph == "declared":
                names = {t.id: t.name for t in reg.tools()}
                records = {t.id: t for t in reg.tools()}
                index = RecordedIndex(live=reg)
                texts = list(
                    dict.fromkeys((clean_query(q.text),) for qs in data.query_sets.values() for q in qs)
                )
                t0 = time.perf_counter()
                for start in range(0, len(texts), 256):
                    index.record(texts[start : start + 256])
                print(f"{name}: {len(texts)} queries in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
                hits = index.hits
            reg.close()
    queries = {
        set_name: [(clean_query(q.text), q.gold, q.split) for q in qs]
        for set_name, qs in data.query_sets.items()
    }
    return Recording(name, queries, hits, names, records, graphs)


def load(name: str) -> Recording:
    with (OUT / f"{name}.pkl").open("rb") as f:
        recording: Recording = pickle.load(f)
    return recording


def evaluate(
    rec: Recording,
    params: RetrievalSettings,
    graph: str,
    *,
    split: str | None = None,
    ks: tuple[int, ...] = (5, 10),
    decomposition: Decomposition | None = None,
) -> dict[str, dict[str, float]]:
    """Metrics per query set (``split`` None = all queries) of ``params`` on the recording; without a
    ``decomposition`` the whole query alone (the recordings hold whole queries only)."""
    if decomposition is None:
        params = params.model_copy(update={"decompose": "off"})
    index = RecordedIndex(records=rec.records, hits=rec.hits)
    deps = RecordedGraph(rec.graphs.get(graph, {}))
    out = {}
    for set_name, queries in rec.queries.items():
        chosen = [q for q in queries if split is None or q[2] == split]
        if not chosen:
            continue
        runs, published = [], []
        for text, gold, _split in chosen:
            ranked = retrieve(text, index, deps, params, decomposition=decomposition)
            runs.append(([rec.names[r.tool_id] for r in ranked], gold))
            published.append([rec.names[r.tool_id] for r in ranked if r.publish])
        out[set_name] = summarize(runs, ks, published)
    return out


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


# -- walk orderings --------------------------------------------------------------------------------------

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


# -- query decomposition + rank fusion (multi-tool requests) --------------------------------------------

DECOMPOSE_DESIGN = ("metatool", "queries_multi")
"""The design set of ``decompose``: every other set (and split) confirms."""

FUSIONS: tuple[tuple[VariantFusion, float], ...] = (
    ("interleave", 1.0),
    ("max", 1.0),
    ("max", 0.9),
    ("max", 0.8),
)
"""The first grid's fusions, each with the parts' weight against the whole query's."""
WEIGHTINGS: tuple[tuple[PartWeighting, float], ...] = (
    ("cosine", 1.0),
    ("cosine", 2.0),
    ("cosine", 4.0),
    ("gap", 1.0),
    ("gap", 2.0),
)
"""The second grid's part weightings, each with the power of its confidence ratio."""

DECOMPOSITIONS: list[tuple[str, LabDecomposition | None]] = [
    ("whole query (today)", None),
    *[
        (
            f"{level} w>={w} rrf",
            LabDecomposition(fusion="rrf", level=level, min_content_words=w, weighting="flat"),
        )
        for level in ("sentences", "clauses")
        for w in (3,)
    ],
    *[
        (
            f"{level} w>={w} {fusion}{'' if pw == 1 else f' parts x{pw}'}",
            LabDecomposition(
                fusion=fusion, level=level, min_content_words=w, part_weight=pw, weighting="flat"
            ),
        )
        for level in ("sentences", "clauses", "and")
        for w in (2, 3, 4)
        for fusion, pw in FUSIONS
    ],
]
"""The grid: where a request may be cut, how many content words each part needs, how the lists fuse."""

WEIGHTED_DECOMPOSITIONS: list[tuple[str, LabDecomposition | None]] = [
    ("whole query (today)", None),
    *[
        (
            f"{level} w>={w} max",
            LabDecomposition(fusion="max", level=level, min_content_words=w, weighting="flat"),
        )
        for level in ("sentences", "clauses", "and")
        for w in (3, 4)
    ],
    *[
        (
            f"{level} w>={w} max {how}^{p:g}",
            LabDecomposition(
                fusion="max", level=level, min_content_words=w, weighting=how, weighting_power=p
            ),
        )
        for level in ("sentences", "clauses", "and")
        for w in (3, 4)
        for how, p in WEIGHTINGS
    ],
]
"""The second grid (branch ``decomp2``): each part's list weighted by its confidence against
the whole query's (``part_weights``), beside the unweighted ``max`` variants it must beat; ``rrf`` and
``interleave`` lost everywhere in the first grid and are left out."""

GRIDS = {"flat": DECOMPOSITIONS, "weighted": WEIGHTED_DECOMPOSITIONS}


def record_parts(
    name: str, embedder: Embedder, grid: Sequence[tuple[str, LabDecomposition | None]] = DECOMPOSITIONS
) -> Recording:
    """The recording of ``name`` with every sub-query of the grid searched too, on a live registry
    rebuilt from the dataset (same tool ids and documents; no edges: they do not change search)."""
    rec = load(name)
    texts = [q[0] for qs in rec.queries.values() for q in qs]
    parts = {(p,) for _label, d in grid if d is not None for t in texts for p in d.split(t)[1:]}
    todo = [p for p in parts if p not in rec.hits]
    if not todo:
        return rec
    data = load_dataset(name)
    with tempfile.TemporaryDirectory(prefix="toolweave-lab-") as tmp:
        reg = Registry.open(
            Path(tmp) / "parts", embedder=embedder, settings=Settings(infer_dependencies=False)
        )
        reg.ingest(data.name, data.tools, [])
        if set(rec.names) != {t.id for t in reg.tools()}:
            raise SystemExit(f"{name}: the live registry's tool ids differ from the recording's")
        index = RecordedIndex(live=reg, hits=rec.hits)
        t0 = time.perf_counter()
        for start in range(0, len(todo), 256):
            index.record(todo[start : start + 256])
        print(f"{name}: {len(todo)} sub-queries in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
        reg.close()
    with (OUT / f"{name}.pkl").open("wb") as f:
        pickle.dump(rec, f)
    return rec


def decompose(names: list[str], with_test: bool = False, grid: str = "flat") -> None:
    """Every decomposition of the grid × method (hybrid; grtf on the declared and inferred graphs) on
    every set and split, through the real pipeline (``retrieve``), with the share of queries split.
    ToolLinkOS ``test`` (and ``all``, which holds it) is scored only with ``with_test``."""
    embedder = CachedEmbedder(Embedder())
    variants = GRIDS[grid]
    rows = []
    for name in names:
        rec = record_parts(name, embedder, variants)
        named = sorted({q[2] for qs in rec.queries.values() for q in qs if q[2]})
        splits: list[str | None] = [None, *named] if len(named) > 1 else [None]
        if name == "toollinkos" and not with_test:
            splits = ["examples"]
        for graph, method in (("none", "hybrid"), ("declared", "grtf"), ("inferred", "grtf")):
            edges = rec.graphs.get(graph, {})
            if graph != "none" and (
                not any(edges.values()) or (graph == "inferred" and edges == rec.graphs.get("declared"))
            ):
                continue  # no edges: grtf = hybrid; or the same edges as the declared graph
            for label, d in variants:
                for split in splits:
                    figures = evaluate(
                        rec, RetrievalSettings(method=method), graph, split=split, decomposition=d
                    )
                    for set_name, m in figures.items():
                        chosen = [q[0] for q in rec.queries[set_name] if split is None or q[2] == split]
                        share = 0.0 if d is None else fmean(len(d.split(t)) > 1 for t in chosen)
                        row = {
                            "dataset": name,
                            "set": set_name,
                            "split": split or "all",
                            "in_sample": (name, set_name) == DECOMPOSE_DESIGN,
                            "method": method,
                            "graph": graph,
                            "variant": label,
                            "split_share": round(share, 4),
                            **{k: round(v, 4) for k, v in m.items() if k.endswith(("@5", "@10"))},
                        }
                        rows.append(row)
                        print(json.dumps(row), flush=True)
    stem = "decompose" if grid == "flat" else f"decompose-{grid}"
    with (OUT / (f"{stem}-{'-'.join(names)}" + ("-with-test" if with_test else "") + ".json")).open("w") as f:
        json.dump(rows, f)


DO_NO_HARM = -0.002
"""The most mAP@10 a choice may cost any set (and graph) it is chosen on, against decomposition off."""


def _decompose_deltas(rows: list[dict[str, object]]) -> dict[str, dict[str, dict[tuple[str, str], float]]]:
    """variant → dataset → (set/split, graph) → Δ mAP@10 of grtf against the whole query, from
    ``decompose`` rows. Units of choice: every query set, a set with splits by split (Seal-Tools dev and
    test_in_domain, API-Bank's levels), ToolLinkOS ``examples`` alone (``test`` is never chosen on).
    Where the lab skipped grtf on a graph (no edges there, or the inferred edges equal the declared ones)
    the figure it equals stands in: hybrid for ``declared``, ``declared`` for ``inferred``."""
    figures: dict[tuple[str, str, str, str, str], float] = {}
    for r in rows:
        key = (str(r["variant"]), str(r["dataset"]), str(r["set"]), str(r["split"]), str(r["graph"]))
        figures[key] = float(r["map@10"])  # type: ignore[arg-type]
    split_sets = {(k[1], k[2]) for k in figures if k[3] != "all"}
    out: dict[str, dict[str, dict[tuple[str, str], float]]] = {}
    for variant, dataset, set_name, split, graph in figures:
        if graph != "none":
            continue
        if dataset == "toollinkos" and split != "examples":
            continue
        if split == "all" and (dataset, set_name) in split_sets:
            continue  # its splits are the units (``all`` would count their queries twice)
        unit = f"{set_name}" if split == "all" else f"{set_name}/{split}"
        for g in ("declared", "inferred"):
            chain = [g, "declared", "none"] if g == "inferred" else [g, "none"]
            now, before = (
                next(figures[k] for x in chain if (k := (v, dataset, set_name, split, x)) in figures)
                for v in (variant, "whole query (today)")
            )
            out.setdefault(variant, {}).setdefault(dataset, {})[(unit, g)] = now - before
    return out


def _fold_choice(
    deltas: dict[str, dict[str, dict[tuple[str, str], float]]], datasets: list[str]
) -> tuple[str, float]:
    """Among the variants that cost no unit of ``datasets`` more than ``DO_NO_HARM``, the best mean gain
    over those datasets (each weighs the same; its units averaged); the whole query (Δ 0) if none gains."""
    best, best_score = "whole query (today)", 0.0
    for variant, by_dataset in deltas.items():
        units = [d for n in datasets for d in by_dataset[n].values()]
        if min(units) < DO_NO_HARM:
            continue
        score = fmean(fmean(by_dataset[n].values()) for n in datasets)
        if score > best_score + 1e-12:
            best, best_score = variant, score
    return best, best_score


def decompose_lodo(paths: list[Path]) -> None:
    """Leave-one-dataset-out choice over ``decompose`` outputs (``paths``: JSON row files): for each
    dataset, the variant ``_fold_choice`` picks on the others, judged on it; then the pick on all."""
    rows = [r for p in paths for r in json.loads(p.read_text())]
    deltas = _decompose_deltas(rows)
    datasets = sorted({n for by in deltas.values() for n in by})
    picks = {}
    for held_out in [*datasets, None]:
        others = [n for n in datasets if n != held_out]
        chosen, score = _fold_choice(deltas, others)
        picks[held_out] = chosen
        judged = deltas[chosen][held_out] if held_out else {}
        print(
            json.dumps(
                {
                    "left_out": held_out or "(none: all datasets)",
                    "chosen": chosen,
                    "in_sample_mean_gain": round(score, 4),
                    "in_sample_worst": round(min(d for n in others for d in deltas[chosen][n].values()), 4),
                    "out_of_sample": {f"{u}@{g}": round(d, 4) for (u, g), d in judged.items()},
                }
            ),
            flush=True,
        )
    for variant, by_dataset in deltas.items():
        print(
            json.dumps(
                {
                    "variant": variant,
                    **{
                        f"{n}:{u}@{g}": round(d, 4)
                        for n, by in by_dataset.items()
                        for (u, g), d in by.items()
                    },
                }
            )
        )


def _cpu_ms() -> float:
    """This process's CPU time (every thread: the full-text searches run on workers, the model on
    onnxruntime's), the load-robust figure beside wall-clock on a shared machine."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return (usage.ru_utime + usage.ru_stime) * 1000


def decompose_latency(name: str, labels: list[str], split: str = "examples") -> None:
    """Retrieval wall-clock and CPU time per query (``retrieve_tools`` on a real registry, the real
    uncached embedder: every variant is a model run, as in the gateway) for the whole query alone and
    for each decomposition in ``labels``, the conditions alternated query by query so that the shared
    machine's load falls on all of them alike."""
    data = load_dataset(name)
    chosen = [q.text for qs in data.query_sets.values() for q in qs if q.split == split]
    grid = dict([*DECOMPOSITIONS, *WEIGHTED_DECOMPOSITIONS])
    conditions = [("whole query (today)", None), *[(lb, grid[lb]) for lb in labels]]
    with tempfile.TemporaryDirectory(prefix="toolweave-lab-") as tmp:
        reg = Registry.open(Path(tmp) / "lat", embedder=CachedEmbedder(Embedder()), settings=Settings())
        reg.ingest(data.name, data.tools, data.edges)  # documents from the disk cache
        reg.embedder = Embedder(query_cache_size=0)  # every query text a model run: no condition
        # finds another's texts already embedded
        params = RetrievalSettings(decompose="off")  # each condition passes its own decomposition
        for text in chosen[:20]:  # warm-up: model load, caches, the fleet record's first turns
            retrieve_tools(reg, text, params)
        times: dict[str, list[tuple[float, float]]] = {label: [] for label, _ in conditions}
        load_before = Path("/proc/loadavg").read_text().split()[0]
        for n, text in enumerate(chosen):
            turn = conditions[n % len(conditions) :] + conditions[: n % len(conditions)]
            for label, d in turn:
                w0, c0 = time.perf_counter(), _cpu_ms()
                retrieve(text, reg, reg.dependencies, params, source_of=reg.source_of, decomposition=d)
                times[label].append(((time.perf_counter() - w0) * 1000, _cpu_ms() - c0))
        load_after = Path("/proc/loadavg").read_text().split()[0]
        reg.close()
    for label, d in conditions:
        wall = sorted(t[0] for t in times[label])
        cpu = sorted(t[1] for t in times[label])
        share = 0.0 if d is None else fmean(len(d.split(t)) > 1 for t in chosen)
        row = {
            "dataset": name,
            "split": split,
            "variant": label,
            "queries": len(chosen),
            "split_share": round(share, 4),
            "extra_variants_per_query": 0.0
            if d is None
            else round(fmean(len(d.split(t)) - 1 for t in chosen), 4),
            "wall_ms_p50": round(wall[len(wall) // 2], 2),
            "wall_ms_p95": round(wall[int(len(wall) * 0.95)], 2),
            "cpu_ms_p50": round(cpu[len(cpu) // 2], 2),
            "cpu_ms_mean": round(fmean(cpu), 2),
            "load_1min": f"{load_before} -> {load_after}",
        }
        if d is not None:  # the split queries alone: their extra cost over the same queries whole
            split_at = [n for n, t in enumerate(chosen) if len(d.split(t)) > 1]
            whole = times["whole query (today)"]
            for i, what in ((0, "wall"), (1, "cpu")):
                extra = sorted(times[label][n][i] - whole[n][i] for n in split_at)
                row[f"split_queries_extra_{what}_ms_p50"] = round(extra[len(extra) // 2], 2) if extra else 0.0
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
