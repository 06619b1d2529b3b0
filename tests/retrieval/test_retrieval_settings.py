"""Retrieval settings of earlier versions: an old manifest or environment keeps working, and says so."""

from __future__ import annotations

import logging
import textwrap
from pathlib import Path

import pytest

from toolweave.errors import ConfigError
from toolweave.manifest import load_manifest
from toolweave.settings import REMOVED_RETRIEVAL_SETTINGS, RetrievalSettings, Settings


def test_a_removed_key_is_ignored_with_a_warning_naming_it(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="toolweave.settings"):
        params = RetrievalSettings.model_validate({"fusion": "rrf", "walk_order": "weighted", "top_k": 4})
    assert params.top_k == 4
    assert not hasattr(params, "fusion") and not hasattr(params, "walk_order")
    warned = [r.getMessage() for r in caplog.records]
    assert len(warned) == 2
    assert "retrieval.fusion is no longer a setting and is ignored" in warned[0]
    assert "retrieval.walk_order" in warned[1] and "remove it" in warned[1]
    assert set(REMOVED_RETRIEVAL_SETTINGS) == {"fusion", "hybrid_alpha", "walk_order"}


def test_an_old_manifest_still_loads_and_a_typo_is_still_refused(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    old = tmp_path / "old.yaml"
    old.write_text(
        textwrap.dedent("retrieval: {method: grtf, hybrid_alpha: 0.7, fusion: zscore, top_k: 5}\n")
    )
    with caplog.at_level(logging.WARNING, logger="toolweave.settings"):
        manifest = load_manifest(old, environ={})
    assert manifest.retrieval.top_k == 5
    assert {"retrieval.fusion", "retrieval.hybrid_alpha"} <= {
        r.getMessage().split(" ")[0] for r in caplog.records
    }
    assert manifest.settings_for(Settings()).retrieval.top_k == 5
    typo = tmp_path / "typo.yaml"
    typo.write_text("retrieval: {fusoin: zscore}\n")
    with pytest.raises(ConfigError, match="fusoin"):
        load_manifest(typo, environ={})


def test_an_old_environment_variable_is_ignored_with_a_warning(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("TOOLWEAVE_RETRIEVAL__HYBRID_ALPHA", "0.5")
    monkeypatch.setenv("TOOLWEAVE_RETRIEVAL__TOP_K", "6")
    with caplog.at_level(logging.WARNING, logger="toolweave.settings"):
        settings = Settings()
    assert settings.retrieval.top_k == 6
    assert any("retrieval.hybrid_alpha" in r.getMessage() for r in caplog.records)
