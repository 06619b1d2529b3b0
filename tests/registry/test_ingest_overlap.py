"""An ingest runs the inference rules while its tools are being embedded, and a failure on either side
leaves the committed registry."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from tests.registry.demo import BANK, demo_registry
from toolweave.errors import EmbeddingError
from toolweave.records import DependencyEdge
from toolweave.registry import Embedder, Registry
from toolweave.registry import registry as registry_module

pytestmark = pytest.mark.integration


def state(reg: Registry) -> tuple[dict[str, str], set[DependencyEdge]]:
    return {t.id: t.content_hash for t in reg.tools()}, set(reg.edges())


class Watched:
    """The embedder's ``embed_documents`` and the registry's ``propose_by_rules``, recording their order."""

    def __init__(self, embedder: Embedder, monkeypatch: pytest.MonkeyPatch) -> None:
        self.ruled = threading.Event()
        self.rules_ran_before_embedded: list[bool] = []
        self.embedded = threading.Event()
        self.fail_embedding = False
        self.fail_rules = False
        real_embed, real_rules = embedder.embed_documents, registry_module.propose_by_rules

        def embed(texts: Sequence[str], batch_size: int = 16) -> np.ndarray:
            try:
                # waits for the rules (bounded: a serial ingest would run them only after this returns)
                self.ruled.wait(timeout=20)
                if self.fail_embedding:
                    raise EmbeddingError("model crashed")
                if self.fail_rules:
                    time.sleep(1.0)  # still embedding when the rules fail: the ingest must wait for it
                return real_embed(texts, batch_size)
            finally:
                self.embedded.set()

        def rules(*args: object, **kwargs: object) -> list[DependencyEdge]:
            self.rules_ran_before_embedded.append(not self.embedded.is_set())
            self.ruled.set()
            if self.fail_rules:
                raise RuntimeError("a rule broke")
            return real_rules(*args, **kwargs)  # type: ignore[arg-type]

        monkeypatch.setattr(embedder, "embed_documents", embed)
        monkeypatch.setattr(registry_module, "propose_by_rules", rules)


def test_the_rules_run_while_the_new_tools_are_embedded(
    tmp_path: Path, shared_embedder: Embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    reg = demo_registry(tmp_path / "reg", shared_embedder)
    watched = Watched(shared_embedder, monkeypatch)
    summary = reg.ingest("bank", BANK)
    assert watched.rules_ran_before_embedded == [True]
    assert summary.added == len(BANK) and summary.edges > 0  # the rules' edges made it in
    reopened = Registry.open(reg.path, embedder=shared_embedder)
    assert state(reopened) == state(reg)


@pytest.mark.parametrize("side", ["embedding", "rules"])
def test_a_failure_on_either_side_leaves_the_committed_state(
    tmp_path: Path, shared_embedder: Embedder, monkeypatch: pytest.MonkeyPatch, side: str
) -> None:
    reg = demo_registry(tmp_path / "reg", shared_embedder)
    committed = state(reg)
    watched = Watched(shared_embedder, monkeypatch)
    watched.fail_embedding = side == "embedding"
    watched.fail_rules = side == "rules"
    with pytest.raises(EmbeddingError if side == "embedding" else RuntimeError):
        reg.ingest("bank", BANK)
    assert watched.embedded.is_set()  # the ingest waited for its embedding before it rolled back
    assert state(reg) == committed
    monkeypatch.undo()
    assert state(Registry.open(reg.path, embedder=shared_embedder)) == committed
