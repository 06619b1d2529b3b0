"""The fleet map offline on BFCL multi-turn: learn on one half of the dialogues, measure the other.

The quick lab beside ``bench/bfcl_replay.py --phases cold,warm,adapted`` (the real gateways): one registry
built from ``tools.jsonl``; each learning-half turn's text is recorded as a usage example of each of its gold
tools (what a gateway records after the calls succeed), flushed, then ``Registry.fleet_map.refit`` with each
fit setting asked for. The measured half (odd dialogue numbers) is ranked by ``retrieve_tools``: cold (no
usage), warm (Tool2Vec usage, no map) and warm + map, mAP@10 / Recall@5, on every measured turn and on the
turns whose gold tools no learning turn reached ("untrained": the map must not cost them).

    nice -n 10 .venv/bin/python bench/fleet_map_lab.py [--method grtf] [--grid l2=0.01,steps=200 ...]
        [--untrained-share 0.3] [--json]

``--untrained-share``: a share of the tools gets no recorded call at all (a stricter check of "no loss on
tools without traffic" than the replay's measured half, where nearly every tool served the learning half).
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

from toolweave.benchmark.datasets import BenchQuery, load_dataset
from toolweave.benchmark.embedding_cache import CachedEmbedder
from toolweave.registry import Embedder, Registry
from toolweave.registry.fleet_fit import FitParams
from toolweave.retrieval import retrieve_tools
from toolweave.retrieval.metrics import summarize
from toolweave.settings import RetrievalSettings, Settings

DATASET = Path(__file__).resolve().parents[1].parent / "shared" / "datasets" / "bfcl_multi_turn"


def number_of(query_id: str) -> int:
    return int(query_id.split("-", 1)[0].rsplit("_", 1)[1])


def figures(reg: Registry, queries: Sequence[BenchQuery], params: RetrievalSettings) -> dict[str, float]:
    names = {t.id: t.name for t in reg.tools()}
    runs = [([names[r.tool_id] for r in retrieve_tools(reg, q.text, params)], q.gold) for q in queries]
    m = summarize(runs, (5, 10))
    return {"map@10": round(m["map@10"], 4), "recall@5": round(m["recall@5"], 4), "queries": len(runs)}


def measure(reg: Registry, parts: dict[str, list[BenchQuery]], params: RetrievalSettings) -> dict[str, Any]:
    return {part: figures(reg, qs, params) for part, qs in parts.items()}


def _bucket(name: str) -> int:
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:4], "big") % 100


def parse_grid(raw: Sequence[str]) -> list[FitParams]:
    out = []
    for item in raw:
        kw: dict[str, Any] = {}
        for pair in item.split(","):
            key, value = pair.split("=")
            kw[key] = int(value) if key in ("steps", "max_tools", "nearest") else float(value)
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
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    data = load_dataset(str(DATASET))
    queries = [q for qs in data.query_sets.values() for q in qs if q.gold]
    learning = [q for q in queries if number_of(q.id) % 2 == 0]
    measured = [q for q in queries if number_of(q.id) % 2 == 1]
    silent = {t.name for t in data.tools if _bucket(t.name) < args.untrained_share * 100}
    trained = {g for q in learning for g in q.gold} - silent
    parts = {
        "measured": measured,
        "untrained": [q for q in measured if not set(q.gold) & trained],
    }
    params = RetrievalSettings(method=args.method)
    embedder = CachedEmbedder(Embedder())
    report: dict[str, Any] = {
        "method": args.method,
        "learning": len(learning),
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
        for fit in parse_grid([g for g in args.grid if g]) or [FitParams()]:
            started = time.perf_counter()
            refit = reg.fleet_map.refit(force=True, params=fit)
            fit_s = time.perf_counter() - started
            row = {
                "variant": f"warm+map l2={fit.l2} steps={fit.steps} lr={fit.lr} scale={fit.scale}",
                "outcome": refit.outcome,
                "examples": refit.examples,
                "held_out_mrr": [round(refit.before, 4), round(refit.after, 4)],
                "fit_s": round(fit_s, 1),
                **measure(reg, parts, params),
            }
            report["rows"].append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
        reg.close()
    for row in report["rows"]:
        m, u = row["measured"], row["untrained"]
        print(
            f"{row['variant']:<48} measured mAP@10 {m['map@10']:.4f} R@5 {m['recall@5']:.4f} ({m['queries']})"
            f" | untrained {u['map@10']:.4f} / {u['recall@5']:.4f} ({u['queries']})",
            file=sys.stderr,
        )
    if args.json:
        print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
