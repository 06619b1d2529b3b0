"""A learned query adapter over the registry's own vectors: leave-one-dataset-out lab.

The cheap candidate beside the fine-tuned encoder (``bench/train_model.py``): the tool vectors stay the int8
MiniLM's (no re-embedding), and a request's vector is mapped ``q → normalise(q + W q)`` before the cosine.
``W`` (384 × 384, starting at 0: the identity map) is trained on request → tool pairs with the whole
catalogue of the request's dataset as negatives (softmax over every tool, scale 20), with an L2 pull of
``W`` towards 0. Runs on the cached vectors: seconds per model.

    nice -n 15 .venv/bin/python bench/query_adapter.py lodo --out bench/out/model/adapter_lodo.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from toolweave.benchmark.datasets import BenchDataset, load_dataset
from toolweave.benchmark.training_pairs import (
    TRAINING_DATASETS,
    hard_negative_indices,
    training_queries,
)
from toolweave.registry.documents import tool_document
from toolweave.retrieval.metrics import summarize
from toolweave.retrieval.query import clean_query

SEED = 13
SCALE = 20.0
CAP = 16


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


@dataclass
class Fleet:
    """One dataset's vectors: tools and every query set."""

    name: str
    data: BenchDataset
    names: list[str]
    docs: np.ndarray
    sets: dict[str, tuple[list[tuple[str, ...]], np.ndarray]]
    """query set → (gold names per query, query vectors)."""
    vector_of: dict[str, np.ndarray]


def embed(texts: Sequence[str]) -> np.ndarray:
    from toolweave.benchmark.embedding_cache import CachedEmbedder
    from toolweave.registry.embeddings import Embedder

    global _EMB
    if _EMB is None:
        _EMB = CachedEmbedder(Embedder(threads=2))
    return np.asarray(_EMB.embed_documents(list(texts)), dtype=np.float32)


_EMB = None


def load_fleet(name: str, every: int) -> Fleet:
    data = load_dataset(name)
    if name == "metatool" and every > 1:
        # 20k single-tool requests: score every n-th, train on the capped picks (kept whatever n is)
        picked = {q.text for q in training_queries([name], cap_per_tool=CAP, seed=SEED, loaded={name: data})}
        single = data.query_sets["queries_single"]
        data.query_sets["queries_single"] = [
            q for i, q in enumerate(single) if i % every == 0 or q.text.strip() in picked
        ]
        data.query_sets["queries_single_scored"] = single[::every]
    names = [t.name for t in data.tools]
    docs = embed([tool_document(t, with_examples=False) for t in data.tools])
    sets: dict[str, tuple[list[tuple[str, ...]], np.ndarray]] = {}
    vector_of: dict[str, np.ndarray] = {}
    for set_name, queries in data.query_sets.items():
        texts = [clean_query(q.text) for q in queries]
        vecs = embed(texts)
        sets[set_name] = ([q.gold for q in queries], vecs)
        vector_of.update(zip(texts, vecs, strict=True))
    log(f"{name}: {len(names)} tools, {sum(len(g) for g, _ in sets.values())} queries")
    return Fleet(name, data, names, docs, sets, vector_of)


def adapt(q: np.ndarray, w: np.ndarray | None) -> np.ndarray:
    if w is None:
        return q
    out = q + q @ w.T
    return out / np.linalg.norm(out, axis=-1, keepdims=True)


def score(fleet: Fleet, w: np.ndarray | None) -> dict[str, dict[str, float]]:
    out = {}
    for set_name, (golds, vecs) in fleet.sets.items():
        if set_name + "_scored" in fleet.sets:
            continue  # scored through its sample
        top = np.argsort(-(adapt(vecs, w) @ fleet.docs.T), axis=1)[:, :10]
        runs = [([fleet.names[i] for i in row], g) for row, g in zip(top, golds, strict=True)]
        m = summarize(runs, (5, 10))
        out[set_name] = {"map@10": round(m["map@10"], 4), "recall@5": round(m["recall@5"], 4)}
    return out


def train_adapter(
    fleets: dict[str, Fleet],
    train_on: Sequence[str],
    *,
    l2: float,
    steps: int,
    cap: int,
    lr: float,
    candidates: int = 64,
) -> np.ndarray:
    """``W`` trained on the requests of ``train_on`` (every tool of a request's dataset a negative)."""
    import torch

    torch.manual_seed(SEED)
    torch.set_num_threads(int(os.environ.get("TRAIN_THREADS", "2")))
    rng = np.random.default_rng(SEED)
    loaded = {  # the scored sample is not trained on
        n: replace(
            fleets[n].data,
            query_sets={k: v for k, v in fleets[n].data.query_sets.items() if not k.endswith("_scored")},
        )
        for n in train_on
    }
    groups = []  # per dataset: query vectors, candidate tool vectors, which candidates are gold
    for name in train_on:
        fleet = fleets[name]
        qs = training_queries([name], cap_per_tool=cap, seed=SEED, loaded=loaded)
        if not qs:
            continue
        qv = np.stack([fleet.vector_of[clean_query(q.text)] for q in qs])
        scores = qv @ fleet.docs.T
        width = max(len(q.positives) for q in qs) + candidates
        cand = np.zeros((len(qs), width), dtype=np.int64)
        pos = np.zeros((len(qs), width), dtype=bool)
        allowed = np.zeros((len(qs), width), dtype=bool)
        for i, q in enumerate(qs):
            # the first pass's best non-gold tools are the negatives: the adapter only reorders the top
            negs = hard_negative_indices(scores[i], q.positives, fleet.names, candidates)
            row = [*q.positives, *negs]
            cand[i, : len(row)] = row
            pos[i, : len(q.positives)] = True
            allowed[i, : len(row)] = True
        docs = torch.tensor(fleet.docs)[torch.tensor(cand)]  # (queries, width, dim)
        groups.append((torch.tensor(qv), docs, torch.tensor(pos), torch.tensor(allowed)))
    # each dataset weighs by the square root of its size: the big ones lead, the small ones still count
    sizes = np.array([len(g[0]) for g in groups], dtype=float)
    probs = np.sqrt(sizes) / np.sqrt(sizes).sum()
    dim = groups[0][0].shape[1]
    w = torch.zeros((dim, dim), requires_grad=True)
    opt = torch.optim.Adam([w], lr=lr)
    for _ in range(steps):
        g = groups[int(rng.choice(len(groups), p=probs))]
        idx = torch.tensor(rng.choice(len(g[0]), size=min(256, len(g[0])), replace=False))
        q, docs, pos, allowed = g[0][idx], g[1][idx], g[2][idx], g[3][idx]
        qa = torch.nn.functional.normalize(q + q @ w.T, dim=-1)
        logits = SCALE * torch.einsum("qd,qcd->qc", qa, docs)
        logits = logits.masked_fill(~allowed, float("-inf"))
        pos_lse = torch.logsumexp(logits.masked_fill(~pos, float("-inf")), dim=1)
        loss = (torch.logsumexp(logits, dim=1) - pos_lse).mean() + l2 * (w**2).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return w.detach().numpy()


def save(path: Path, w: np.ndarray) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    np.save(path, w.astype(np.float32))


def cmd_lodo(args: argparse.Namespace) -> None:
    names = [*TRAINING_DATASETS, "toollinkos"]
    fleets = {n: load_fleet(n, args.every) for n in names}
    base = {n: score(f, None) for n, f in fleets.items()}
    grid = [(l2, steps) for l2 in args.l2 for steps in args.steps]
    out: dict[str, object] = {"base": base, "runs": {}}
    runs: dict[str, object] = {}
    for l2, steps in grid:
        key = f"l2={l2} steps={steps}"
        held: dict[str, object] = {}
        for left in TRAINING_DATASETS:
            train_on = [d for d in TRAINING_DATASETS if d != left]
            w = train_adapter(fleets, train_on, l2=l2, steps=steps, cap=args.cap, lr=args.lr)
            held[left] = score(fleets[left], w)
            save(Path(args.out).with_suffix("") / key / f"without-{left}.npy", w)
        w_all = train_adapter(fleets, TRAINING_DATASETS, l2=l2, steps=steps, cap=args.cap, lr=args.lr)
        held["toollinkos"] = score(fleets["toollinkos"], w_all)
        save(Path(args.out).with_suffix("") / key / "all.npy", w_all)
        insample = {d: score(fleets[d], w_all) for d in TRAINING_DATASETS}
        runs[key] = {"out_of_sample": held, "in_sample_all": insample}
        log(json.dumps({key: held}))
    out["runs"] = runs
    Path(args.out).write_text(json.dumps(out, indent=1), encoding="utf-8")


def cmd_ship(args: argparse.Namespace) -> None:
    """The shipped adapter: trained on every dataset of ``TRAINING_DATASETS`` (no ToolLinkOS request)."""
    import hashlib

    fleets = {n: load_fleet(n, args.every) for n in TRAINING_DATASETS}
    started = time.process_time()
    w = train_adapter(fleets, TRAINING_DATASETS, l2=args.l2[0], steps=args.steps[0], cap=args.cap, lr=args.lr)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    np.save(out, w.astype(np.float32))
    print(
        json.dumps(
            {
                "file": str(out),
                "sha256": hashlib.sha256(out.read_bytes()).hexdigest(),
                "bytes": out.stat().st_size,
                "train_cpu_s": round(time.process_time() - started, 1),
                "l2": args.l2[0],
                "steps": args.steps[0],
                "cap": args.cap,
                "lr": args.lr,
                "seed": SEED,
            }
        )
    )


def cmd_realpath(args: argparse.Namespace) -> None:
    """Each dataset through the real pipeline (``run_benchmark``: a fresh registry, grtf with the declared
    graph, name match, decomposition, floor) with MiniLM and with the adapter that never saw it
    (``without-<dataset>.npy``; ToolLinkOS: ``all.npy``). MetaTool single: every ``--every``-th request."""
    import hashlib

    from toolweave.benchmark.embedding_cache import CachedEmbedder
    from toolweave.benchmark.runner import run_benchmark
    from toolweave.commands.bench import bench_retrieval
    from toolweave.commands.search import retrieval_params
    from toolweave.registry.embeddings import Embedder
    from toolweave.registry.models import MINILM, QUERY_ADAPTERS, QueryAdapterSpec

    params = retrieval_params(bench_retrieval(True), method="grtf", top_k=3, final_k=10)
    weights = Path(args.weights)
    out = Path(args.out)
    for name in args.dataset or [*TRAINING_DATASETS, "toollinkos"]:
        data = load_dataset(name)
        if name == "metatool" and args.every > 1:
            data.query_sets["queries_single"] = data.query_sets["queries_single"][:: args.every]
        use_all = name == "toollinkos" or args.in_sample
        file = weights / ("all.npy" if use_all else f"without-{name}.npy")
        models = [] if args.skip_base else [("minilm", MINILM.name)]
        if file.is_file():
            digest = hashlib.sha256(file.read_bytes()).hexdigest()
            spec = QueryAdapterSpec(f"lab/{digest[:12]}", MINILM.name, file, digest)
            QUERY_ADAPTERS[spec.name] = spec
            models.append(("adapter", spec.name))
        for label, model in models:
            for r in run_benchmark(
                data, params, graph="declared", embedder=CachedEmbedder(Embedder(model)), ks=(5, 10)
            ):
                row = {"model": label, "weights": str(file), **r.as_json()}
                log(json.dumps(row))
                with out.open("a", encoding="utf-8") as f:
                    f.write(json.dumps(row) + "\n")


def cmd_table(args: argparse.Namespace) -> None:
    """Markdown rows of a ``lodo`` output: base, out-of-sample and in-sample mAP@10 / R@5 per query set."""
    res = json.loads(Path(args.file).read_text(encoding="utf-8"))
    for key, run in res["runs"].items():
        print(f"\n{key}\n\n| dataset / set | MiniLM | adapter, out of sample | adapter, in sample |")
        print("|---|---|---|---|")
        gains = []
        for d, sets in res["base"].items():
            for set_name, b in sets.items():
                o = run["out_of_sample"][d][set_name]
                i = run["in_sample_all"].get(d, {}).get(set_name)
                gains.append(o["map@10"] - b["map@10"])
                ins = f"{i['map@10']:.4f} / {i['recall@5']:.3f}" if i else "never trained on"
                print(
                    f"| {d} / {set_name} | {b['map@10']:.4f} / {b['recall@5']:.3f} | "
                    f"{o['map@10']:.4f} / {o['recall@5']:.3f} ({o['map@10'] - b['map@10']:+.4f}) | {ins} |"
                )
        print(f"\nmean out-of-sample change {np.mean(gains):+.4f}, worst {min(gains):+.4f}")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    sub = parser.add_subparsers(required=True)
    for name, func in (("lodo", cmd_lodo), ("ship", cmd_ship)):
        p = sub.add_parser(name)
        p.set_defaults(func=func)
        p.add_argument("--out", default=f"bench/out/model/adapter_{name}.json")
        p.add_argument("--l2", type=float, action="append", default=None)
        p.add_argument("--steps", type=int, action="append", default=None)
        p.add_argument("--cap", type=int, default=CAP)
        p.add_argument("--every", type=int, default=4, help="MetaTool single: score every n-th request")
        p.add_argument("--lr", type=float, default=1e-3)
    r = sub.add_parser("realpath")
    r.set_defaults(func=cmd_realpath)
    r.add_argument("--weights", required=True, help="a lodo output folder of one setting")
    r.add_argument("--out", default="bench/out/model/realpath.jsonl")
    r.add_argument("--dataset", action="append")
    r.add_argument("--every", type=int, default=4)
    r.add_argument("--skip-base", action="store_true")
    r.add_argument("--in-sample", action="store_true", help="score all.npy (trained on every dataset)")
    t = sub.add_parser("table")
    t.set_defaults(func=cmd_table)
    t.add_argument("file")
    args = parser.parse_args(argv)
    if args.func in (cmd_table, cmd_realpath):
        args.func(args)
        return
    args.l2 = args.l2 or [0.01]
    args.steps = args.steps or [300]
    args.func(args)


if __name__ == "__main__":
    main()
