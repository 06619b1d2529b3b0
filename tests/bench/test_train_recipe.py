"""The training recipe run from a pack, as on a GPU machine without the project's runtime: the pack
carries everything the run reads, and the change it returns rebuilds the trained weights on the exact
base model. A tiny random BERT stands in for MiniLM (the logic under test is ours, not the model's)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the train extra (pip install -e '.[train]') is not installed")
transformers = pytest.importorskip("transformers", reason="the train extra is not installed")

from train_recipe import (  # noqa: E402  (after the skips: it needs the train extra)
    Encoder,
    Fleet,
    Pair,
    apply_delta,
    batch_loss,
    pack_weights,
    read_pack,
    run_training,
    val_scores,
    write_delta,
    write_pack,
)

TOKENIZER = Path(__file__).resolve().parents[2] / "toolweave" / "registry" / "minilm" / "tokenizer.json"
DIM = 32


@pytest.fixture
def base_dir(tmp_path: Path) -> Path:
    torch.manual_seed(0)
    config = transformers.BertConfig(
        vocab_size=30522,
        hidden_size=DIM,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
    )
    folder = tmp_path / "base"
    transformers.BertModel(config).save_pretrained(str(folder))
    (folder / "tokenizer.json").write_bytes(TOKENIZER.read_bytes())
    return folder


def _fleets() -> dict[str, Fleet]:
    rng = np.random.default_rng(1)
    vectors = rng.normal(size=(4, DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    names = ["get_weather", "get_weather#2", "send_mail", "read_file"]
    return {"demo/0": Fleet.of("demo", names, vectors, "cpu")}


TRAIN = [
    Pair("demo", "what is the weather in paris", "demo/0", (0,), (0, 1)),
    Pair("demo", "email my boss the report", "demo/0", (2,), (2,)),
    Pair("demo", "open the notes file and read it", "demo/0", (3,), (3,)),
    Pair("demo", "forecast for tomorrow then mail it", "demo/0", (0, 2), (0, 1, 2)),
]
VAL = [Pair("demo", "is it raining in berlin", "demo/0", (0,), (0, 1))]


def _args(**over: Any) -> argparse.Namespace:
    values: dict[str, Any] = {
        "epochs": 2,
        "batch": 2,
        "lr": 1e-3,
        "scale": 20.0,
        "margin": 0.0,
        "query_len": 32,
        "freeze": 0,
    }
    values |= {"seed": 3, "threads": 1, "device": "cpu", "fresh": True}
    return argparse.Namespace(**(values | over))


def test_a_pack_holds_the_pairs_the_vectors_and_every_token_the_requests_use(
    tmp_path: Path, base_dir: Path
) -> None:
    fleets = _fleets()
    pack = tmp_path / "pack"
    write_pack(pack, TRAIN, VAL, fleets, {"mean": 0.5}, base_dir, {"seed": 3}, max_len=128)

    train, val, read, doc = read_pack(pack, "cpu")
    assert (train, val) == (TRAIN, VAL)
    assert doc["today"] == {"mean": 0.5} and doc["meta"] == {"seed": 3}
    assert read["demo/0"].names == fleets["demo/0"].names
    np.testing.assert_allclose(read["demo/0"].host, fleets["demo/0"].host, atol=1e-3)

    # the model built from the pack embeds the pack's requests as the base model does (fp16 weights),
    # although only the vocabulary rows those requests use travelled
    weights = pack_weights(pack)
    assert int((weights["embeddings.word_embeddings.weight"].abs().sum(1) > 0).sum()) < 200
    texts = [p.text for p in [*TRAIN, *VAL]]
    packed = Encoder(pack, "cpu", weights=weights).embed(texts, max_len=128)
    np.testing.assert_allclose(packed, Encoder(base_dir, "cpu").embed(texts, max_len=128), atol=2e-3)


def test_the_returned_change_rebuilds_the_kept_epoch_on_the_exact_base(
    tmp_path: Path, base_dir: Path
) -> None:
    pack = tmp_path / "pack"
    write_pack(pack, TRAIN, VAL, _fleets(), {"mean": -1.0}, base_dir, {}, max_len=128)
    train, val, fleets, doc = read_pack(pack, "cpu")
    base = pack_weights(pack)
    enc = Encoder(pack, "cpu", weights=base)
    run = tmp_path / "run"
    run.mkdir()

    info = run_training(enc, train, val, fleets, lambda: dict(doc["today"]), _args(), run)
    paths = write_delta(enc, run / "best.pt", base, run)

    assert [v["epoch"] for v in info["val"]] == [0, 1, 2] and info["best"]["epoch"] >= 1
    assert len(paths) == 2 and all(p.stat().st_size > 0 for p in paths)
    exact = Encoder(base_dir, "cpu")
    rebuilt = apply_delta(exact.model.state_dict(), paths)
    kept = torch.load(run / "best.pt", weights_only=True)
    layer = "encoder.layer.1.output.dense.weight"
    assert not torch.equal(kept[layer], exact.model.state_dict()[layer])  # it trained
    torch.testing.assert_close(rebuilt[layer], kept[layer], atol=2e-3, rtol=0)
    # the frozen embeddings are the exact base's, not the pack's fp16 copy
    assert torch.equal(
        rebuilt["embeddings.word_embeddings.weight"],
        exact.model.state_dict()["embeddings.word_embeddings.weight"],
    )
    exact.model.load_state_dict(rebuilt)
    texts = [p.text for p in val]
    assert val_scores(val, exact.embed(texts, max_len=128), fleets)["demo"] == info["best"]["demo"]


def test_a_margin_asks_the_gold_to_lead_by_it(base_dir: Path) -> None:
    """With a margin the gold's logit counts ``scale × margin`` less: each term's loss grows, and by
    exactly the cross-entropy of the lowered logit (checked on one request with one gold)."""
    enc, fleets = Encoder(base_dir), _fleets()
    one = [TRAIN[1]]
    with torch.no_grad():
        plain = float(batch_loss(enc, one, fleets, _args()))
        lowered = float(batch_loss(enc, one, fleets, _args(margin=0.2)))
        logits = 20.0 * enc.forward([one[0].text], 32)[0] @ fleets["demo/0"].vectors.T
        logits[2] -= 20.0 * 0.2
        expected = float(torch.nn.functional.cross_entropy(logits[None], torch.tensor([2])))
    assert lowered > plain
    assert lowered == pytest.approx(expected, rel=1e-5)
