"""Unknown ``TOOLWEAVE_*`` variables: a typo in a known section is refused, an unknown name warned about."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from toolweave.settings import Settings, unknown_environment_keys


def test_a_typo_inside_a_section_is_refused_with_its_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOLWEAVE_RETRIEVAL__TOP_KK", "5")
    with pytest.raises(ValidationError, match=r"retrieval\.top_kk"):
        Settings()
    monkeypatch.delenv("TOOLWEAVE_RETRIEVAL__TOP_KK")
    monkeypatch.setenv("TOOLWEAVE_RETRIEVAL__TOP_K", "5")
    assert Settings().retrieval.top_k == 5


def test_an_unknown_name_is_ignored_with_a_warning(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOLWEAVE_CALL_TIMEOUT", "5")
    with pytest.warns(UserWarning, match=r"TOOLWEAVE_CALL_TIMEOUT is not a toolweave setting"):
        settings = Settings()
    assert settings.call_timeout_s == Settings.model_fields["call_timeout_s"].default


def test_known_names_and_sections_are_not_reported() -> None:
    environ = {
        "TOOLWEAVE_HOME": "/x",
        "TOOLWEAVE_RETRIEVAL__METHOD": "bm25",
        "TOOLWEAVE_SECURITY__AUTH": "tokens",
        "TOOLWEAVE_FIND_CACHE_SIZE": "3",
        "TOOLWEAVE_TYPO": "1",
        "TOOLWEAVE_NOPE__X": "1",
        "OTHER": "1",
    }
    assert unknown_environment_keys(environ) == ["TOOLWEAVE_NOPE__X", "TOOLWEAVE_TYPO"]


def test_the_registry_directory_that_serve_sets_is_no_unknown_setting() -> None:
    """``toolweave serve`` sets ``TOOLWEAVE_REGISTRY_DIR`` for manifests: the settings read after it (and
    by the ``toolweave`` processes it starts) must not warn about it."""
    from toolweave.settings import REGISTRY_DIR_VAR, unknown_environment_keys

    environ = {REGISTRY_DIR_VAR: "/tmp/registry", "TOOLWEAVE_CALL_TIMEOUT": "1"}
    assert unknown_environment_keys(environ) == ["TOOLWEAVE_CALL_TIMEOUT"]
