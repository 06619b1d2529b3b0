"""An ingest runs its inference while LanceDB builds the full-text index (after the embedding, which
runs alone), and a failure on either side leaves the committed registry."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.registry.demo import BANK, demo_registry
from toolweave.errors import RegistryError
from toolweave.inference import propose_by_rules
from toolweave.records import DependencyEdge
from toolweave.registry import Embedder, Registry
from toolweave.registry import ingest as ingest_module

pytestmark = pytest.mark.integration


def state(reg: Registry) -> tuple[dict[str, str], set[DependencyEdge]]:
    return {t.id: t.content_hash for t in reg.tools()}, set(reg.edges())


class Watched:
    """The registry's embedding, full-text index build and ``propose_by_rules``, recording their order."""

    def __init__(self, reg: Registry, monkeypatch: pytest.MonkeyPatch) -> None:
        self.embedded = threading.Event()
        self.ruled = threading.Event()
        self.indexed = threading.Event()
        self.rules_saw: list[tuple[bool, bool]] = []  # (embedded, indexed) when the rules ran
        self.fail_index = False
        self.fail_rules = False
        real_embed, real_index = reg._ingest._embed, reg._state.table.rebuild_text_index
        real_rules = propose_by_rules

        def embed(*args: Any, **kwargs: Any) -> list[np.ndarray]:
            try:
                return real_embed(*args, **kwargs)
            finally:
                self.embedded.set()

        def index() -> None:
            try:
                # waits for the rules (bounded: a serial ingest would run them only after this returns)
                self.ruled.wait(timeout=20)
                if self.fail_index:
                    raise RegistryError("full-text index: disk full")
                if self.fail_rules:
                    time.sleep(1.0)  # still indexing when the rules fail: the rollback must wait for it
                real_index()
            finally:
                self.indexed.set()

        def rules(*args: Any, **kwargs: Any) -> list[DependencyEdge]:
            self.rules_saw.append((self.embedded.is_set(), self.indexed.is_set()))
            self.ruled.set()
            if self.fail_rules:
                raise RuntimeError("a rule broke")
            return real_rules(*args, **kwargs)

        monkeypatch.setattr(reg._ingest, "_embed", embed)
        monkeypatch.setattr(reg._state.table, "rebuild_text_index", index)
        monkeypatch.setattr(ingest_module, "propose_by_rules", rules)


def test_the_inference_runs_while_the_full_text_index_is_built(
    tmp_path: Path, shared_embedder: Embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    reg = demo_registry(tmp_path / "reg", shared_embedder)
    watched = Watched(reg, monkeypatch)
    summary = reg.ingest("bank", BANK)
    assert watched.rules_saw == [(True, False)]  # after the embedding, before the index was done
    assert summary.added == len(BANK) and summary.edges > 0  # the rules' edges made it in
    assert reg.text_hits("alarm", 3)  # the new snapshot searches the new index
    reopened = Registry.open(reg.path, embedder=shared_embedder)
    assert state(reopened) == state(reg)


@pytest.mark.parametrize("side", ["index", "rules"])
def test_a_failure_on_either_side_leaves_the_committed_state(
    tmp_path: Path, shared_embedder: Embedder, monkeypatch: pytest.MonkeyPatch, side: str
) -> None:
    reg = demo_registry(tmp_path / "reg", shared_embedder)
    committed = state(reg)
    watched = Watched(reg, monkeypatch)
    watched.fail_index = side == "index"
    watched.fail_rules = side == "rules"
    with pytest.raises(RegistryError if side == "index" else RuntimeError):
        reg.ingest("bank", BANK)
    if side == "index":
        assert watched.indexed.is_set()  # the ingest waited for the index build before it rolled back
    else:
        assert not watched.indexed.is_set()  # inference runs before the write: nothing was built yet
    assert state(reg) == committed
    monkeypatch.undo()
    assert state(Registry.open(reg.path, embedder=shared_embedder)) == committed
