"""The fleet map offline: learn on one half of a dataset's requests, measure the other.

The quick lab beside ``bench/bfcl_replay.py --phases cold,warm,adapted`` (the real gateways): one registry
built from the dataset's tools; each learning-half request is recorded as a usage example of each of its gold
tools (what a gateway records after the calls succeed), flushed, then ``Registry.fleet_map.refit`` with each
fit setting asked for. The measured half is ranked by ``retrieve_tools``: cold (no usage), warm (Tool2Vec
usage, no map) and warm + map, mAP@10 / Recall@5, on every measured request, on those whose gold tools no
learning request reached ("untrained": the map must not cost them) and on those the default model never
trained on ("model_unseen"). BFCL multi-turn halves by dialogue number (even learns), other datasets by a
hash of the request id.

    nice -n 10 .venv/bin/python bench/fleet_map_lab.py [--dataset metatool --query-set queries_single]
        [--measure-cap 2000] [--method grtf] [--grid l2=0.01,steps=200 ...] [--untrained-share 0.3] [--ready]
        [--json]

``--ready``: also the first answers of a launch on that registry, from the ready table it leaves (with and
without what the fleet learned). ``--untrained-share``: a share of the tools gets no recorded call at all
(a stricter check of "no loss on tools without traffic" than the replay's measured half, where nearly
every tool served the learning half).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from training_pairs import POOL, pool_split

from toolweave.benchmark.datasets import BenchQuery, load_dataset
from toolweave.benchmark.embedding_cache import CachedEmbedder
from toolweave.registry import Embedder, Registry
from toolweave.registry.fleet_fit import FitParams
from toolweave.retrieval import retrieve_tools
from toolweave.retrieval.metrics import summarize
from toolweave.settings import RetrievalSettings, Settings

DATASETS = Path(__file__).resolve().parents[1].parent / "shared" / "datasets"


def number_of(query_id: str) -> int:
    return int(query_id.split("-", 1)[0].rsplit("_", 1)[1])


def figures(reg: Registry, queries: Sequence[BenchQuery], params: RetrievalSettings) -> dict[str, float]:
    names = {t.id: t.name for t in reg.tools()}
    runs = [([names[r.tool_id] for r in retrieve_tools(reg, q.text, params)], q.gold) for q in queries]
    m = summarize(runs, (5, 10))
    return {"map@10": round(m["map@10"], 4), "recall@5": round(m["recall@5"], 4), "queries": len(runs)}


def measure(reg: Registry, parts: dict[str, list[BenchQuery]], params: RetrievalSettings) -> dict[str, Any]:
    return {part: figures(reg, qs, params) for part, qs in parts.items()}


def half_of(dataset: str, query_id: str) -> int:
    """0: the learning half, 1: the measured half. A BFCL dialogue's turns stay in one half."""
    if dataset == "bfcl_multi_turn":
        return number_of(query_id) % 2
    return int.from_bytes(hashlib.sha256(query_id.encode()).digest()[4:8], "big") % 2


def quarter_of(dataset: str, query_id: str) -> int:
    """With ``--validate``, the learning half split again: 0 learns, 1 is measured (the measured half
    is not touched, so what is chosen here has not seen it)."""
    if dataset == "bfcl_multi_turn":
        return number_of(query_id) // 2 % 2
    return int.from_bytes(hashlib.sha256(query_id.encode()).digest()[8:12], "big") % 2


def unseen_by_model(dataset: str, query_set: str | None, query: BenchQuery) -> bool:
    """A request the default model never trained on: out of its pool, or in the pool's test split."""
    sets = POOL.get(dataset, ())
    if dataset not in POOL or (sets is not None and query_set is not None and query_set not in sets):
        return True
    return pool_split(dataset, query) == "test"


def ready_rows(
    reg: Registry, parts: dict[str, list[BenchQuery]], params: RetrievalSettings
) -> list[dict[str, Any]]:
    """The ready table a gateway on ``reg`` leaves (``server/turns/ready_rank.py``), ranking as a starting
    launch does once its query encoder is up: with the tools' vectors alone, and with what the fleet
    learned (usage vectors and the request map) as it now carries."""
    from toolweave.registry.documents import tool_document
    from toolweave.server.turns import ready_index, ready_rank

    records = reg.tools()
    files = ready_rank.search_files(reg, records)
    assert files is not None, "the registry lacks a tool's vector"
    rows = [
        ready_index.ReadyTool(r.id, r.name, {"name": r.name}, r.description, tool_document(r))
        for r in records
    ]
    ready_index.write(str(reg.path), rows, *files)
    learned = ready_rank.prepare(str(reg.path), reg.embedder.model_id)
    assert learned is not None, "the ready table was not written"
    plain = ready_rank.ReadySearch(
        learned.table, ready_rank.ReadyVectors.plain(learned.vectors.tools), learned.encoder
    )
    out: list[dict[str, Any]] = []
    for variant, index in (
        ("ready table, tool vectors only", plain),
        ("ready table + what the fleet learned", learned),
    ):
        ranker = ready_rank.ReadyRanker(index, params)
        row: dict[str, Any] = {"variant": variant}
        for part, queries in parts.items():
            runs = [([t.name for t, _ in ranker.ranked(q.text, 10)], q.gold) for q in queries]
            m = summarize(runs, (5, 10))
            row[part] = {
                "map@10": round(m["map@10"], 4),
                "recall@5": round(m["recall@5"], 4),
                "queries": len(runs),
            }
        out.append(row)
        print(json.dumps(row), file=sys.stderr, flush=True)
    return out


def _bucket(name: str) -> int:
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:4], "big") % 100


def parse_grid(raw: Sequence[str]) -> list[FitParams | None]:
    """``l2=0.01,steps=200`` → those settings; ``tuned`` → None (the refit tunes its own, ``TUNING``)."""
    out: list[FitParams | None] = []
    for item in raw:
        if item == "tuned":
            out.append(None)
            continue
        kw: dict[str, Any] = {}
        for pair in item.split(","):
            key, value = pair.split("=")
            if key == "each_gold":
                kw[key] = value in ("1", "true", "yes")
            else:
                kw[key] = int(value) if key in ("steps", "max_tools", "nearest", "hard_top") else float(value)
        out.append(FitParams(**kw))
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--method", default="grtf")
    parser.add_argument("--grid", nargs="*", default=[""], help="fit settings, e.g. l2=0.01,steps=200")
    parser.add_argument(
        "--untrained-share",
        type=float,
        default=0.0,
        help="share of the tools (by a hash of the name) given no recorded call",
    )
    parser.add_argument(
        "--dataset",
        default="bfcl_multi_turn",
        help="a folder of ../shared/datasets; BFCL multi-turn halves by dialogue, others by a hash of the id",
    )
    parser.add_argument("--query-set", help="only this query set of the dataset (e.g. queries_single)")
    parser.add_argument("--measure-cap", type=int, default=0, help="measure at most this many (by hash)")
    parser.add_argument(
        "--validate",
        action="store_true",
        help="learn on half of the learning half and measure its other half (to choose settings on)",
    )
    parser.add_argument("--ready", action="store_true", help="also the ready table's first answers, as left")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    folder = DATASETS / args.dataset
    if not folder.is_dir():
        print(f"fleet_map_lab: {folder} is absent (../shared beside the repository)", file=sys.stderr)
        return 2
    data = load_dataset(str(folder))
    queries = [
        q for name, qs in data.query_sets.items() if args.query_set in (None, name) for q in qs if q.gold
    ]
    learning = [q for q in queries if half_of(args.dataset, q.id) == 0]
    measured = [q for q in queries if half_of(args.dataset, q.id) == 1]
    if args.validate:
        measured = [q for q in learning if quarter_of(args.dataset, q.id) == 1]
        learning = [q for q in learning if quarter_of(args.dataset, q.id) == 0]
    if args.measure_cap:
        measured = sorted(measured, key=lambda q: _bucket(q.id) * 1e9 + len(q.id))[: args.measure_cap]
    silent = {t.name for t in data.tools if _bucket(t.name) < args.untrained_share * 100}
    trained = {g for q in learning for g in q.gold} - silent
    parts = {
        "measured": measured,
        "untrained": [q for q in measured if not set(q.gold) & trained],
        # The default model trained on the pool's train split of this dataset: its test split is the part
        # of the measured half that the model never saw, where cold is not in sample.
        "model_unseen": [q for q in measured if unseen_by_model(args.dataset, args.query_set, q)],
    }
    params = RetrievalSettings(method=args.method)
    embedder = CachedEmbedder(Embedder())
    report: dict[str, Any] = {
        "method": args.method,
        "learning": len(learning),
        "validate": args.validate,
        "untrained_tools": len(silent),
        "rows": [],
    }
    with tempfile.TemporaryDirectory(prefix="toolweave-fleet-lab-") as tmp:
        settings = Settings(fleet_map_min_examples=1)
        reg = Registry.open(Path(tmp) / "registry", embedder=embedder, settings=settings)
        reg.ingest(data.name, data.tools, [])
        ids = {t.name: t.id for t in reg.tools()}
        report["rows"].append({"variant": "cold", **measure(reg, parts, params)})
        for q in learning:
            for gold in set(q.gold) - silent:
                reg.record_usage(ids[gold], q.text)
        reg.flush_observations()
        report["rows"].append({"variant": "warm", **measure(reg, parts, params)})
        for fit in parse_grid([g for g in args.grid if g]) or [None]:
            started = time.perf_counter()
            refit = reg.fleet_map.refit(force=True, params=fit)
            fit_s = time.perf_counter() - started
            row = {
                "variant": "warm+map tuned"
                if fit is None
                else f"warm+map l2={fit.l2} steps={fit.steps} lr={fit.lr} scale={fit.scale}"
                f" each_gold={fit.each_gold} hard={fit.hard}/{fit.hard_top}",
                "outcome": refit.outcome,
                "examples": refit.examples,
                "held_out_ap": [round(refit.before, 4), round(refit.after, 4)],
                "fit_s": round(fit_s, 1),
                **measure(reg, parts, params),
            }
            report["rows"].append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
        if args.ready:
            report["rows"].extend(ready_rows(reg, parts, params))
        reg.close()
    for row in report["rows"]:
        m, u, s = row["measured"], row["untrained"], row["model_unseen"]
        print(
            f"{row['variant']:<72} measured mAP@10 {m['map@10']:.4f} R@5 {m['recall@5']:.4f} ({m['queries']})"
            f" | untrained {u['map@10']:.4f} / {u['recall@5']:.4f} ({u['queries']})"
            f" | model unseen {s['map@10']:.4f} / {s['recall@5']:.4f} ({s['queries']})",
            file=sys.stderr,
        )
    if args.json:
        print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
