"""Query decomposition + rank fusion for multi-tool requests: the grids, their scoring, the choice among
them (``decompose-lodo``) and their latency on a live registry (``decompose-latency``).

Apart from the other experiments because it needs more than the recordings hold: every sub-query is
searched once on a live registry (``record_parts``) and added to the recording. ``DO_NO_HARM`` and
``_fold_choice`` are the protocol the later labs (``name_match_lab.py``, ``smoothing_lab.py``) reuse.
"""

from __future__ import annotations

import json
import pickle
import resource
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from statistics import fmean

from labs.decompose_variants import LabDecomposition, PartWeighting, VariantFusion
from ranking_recording import OUT, Recording, evaluate, load

from toolweave.benchmark import load_dataset
from toolweave.benchmark.embedding_cache import CachedEmbedder
from toolweave.benchmark.recorded import RecordedIndex
from toolweave.registry import Embedder, Registry
from toolweave.retrieval import retrieve, retrieve_tools
from toolweave.settings import RetrievalSettings, Settings

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
