"""Settings that moved out of ``security`` (``MOVED_SETTINGS``): the new names work, and an old manifest or
environment keeps working, its value in the new place, with a warning naming both."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from pydantic import ValidationError

from toolweave.errors import ConfigError
from toolweave.manifest import load_manifest
from toolweave.settings import MOVED_SETTINGS, SecuritySettings, Settings


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "toolweave.settings"]


def test_the_moved_settings_are_top_level_and_no_longer_security() -> None:
    assert MOVED_SETTINGS == {
        "security.find_cache_size": "find_cache_size",
        "security.metrics_port": "metrics_port",
    }
    assert {"find_cache_size", "metrics_port"} <= Settings.model_fields.keys()
    assert not {"find_cache_size", "metrics_port"} & SecuritySettings.model_fields.keys()


def test_the_new_environment_names_set_them_without_a_warning(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("TOOLWEAVE_FIND_CACHE_SIZE", "7")
    monkeypatch.setenv("TOOLWEAVE_METRICS_PORT", "9109")
    with caplog.at_level(logging.WARNING, logger="toolweave.settings"):
        settings = Settings()
    assert (settings.find_cache_size, settings.metrics_port) == (7, 9109)
    assert _warnings(caplog) == []


def test_the_old_environment_names_still_set_them_with_a_warning(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("TOOLWEAVE_SECURITY__FIND_CACHE_SIZE", "0")
    monkeypatch.setenv("TOOLWEAVE_SECURITY__METRICS_PORT", "9108")
    monkeypatch.setenv("TOOLWEAVE_SECURITY__DEFAULT_IDENTITY", "me")  # the rest of the section stays
    with caplog.at_level(logging.WARNING, logger="toolweave.settings"):
        settings = Settings()
    assert (settings.find_cache_size, settings.metrics_port) == (0, 9108)
    assert settings.security.default_identity == "me"
    warned = _warnings(caplog)
    assert len(warned) == 2
    assert warned[0].startswith(
        "security.find_cache_size (TOOLWEAVE_SECURITY__FIND_CACHE_SIZE) is now find_cache_size "
        "(TOOLWEAVE_FIND_CACHE_SIZE)"
    )
    assert "security.metrics_port" in warned[1] and "TOOLWEAVE_METRICS_PORT" in warned[1]


def test_the_new_name_wins_over_the_old_one(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("TOOLWEAVE_SECURITY__FIND_CACHE_SIZE", "0")
    monkeypatch.setenv("TOOLWEAVE_FIND_CACHE_SIZE", "5")
    with caplog.at_level(logging.WARNING, logger="toolweave.settings"):
        assert Settings().find_cache_size == 5
    assert any("also set and wins: remove security.find_cache_size" in m for m in _warnings(caplog))


def test_an_old_value_is_checked_like_a_new_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOLWEAVE_SECURITY__FIND_CACHE_SIZE", "-1")
    with pytest.raises(
        ValidationError, match=r"(?m)^find_cache_size\n\s+Input should be greater than or equal to 0"
    ):
        Settings()


def test_a_callers_dict_is_left_as_it_was() -> None:
    security = {"metrics_port": 9107, "default_identity": "me"}
    settings = Settings.model_validate({"security": security})
    assert settings.metrics_port == 9107 and settings.security.default_identity == "me"
    assert security == {"metrics_port": 9107, "default_identity": "me"}


def test_an_old_manifest_still_sets_them_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    old = tmp_path / "old.yaml"
    old.write_text("security: {find_cache_size: 0, metrics_port: 9106, default_identity: me}\n")
    with caplog.at_level(logging.WARNING, logger="toolweave.settings"):
        manifest = load_manifest(old, environ={})
    warned = _warnings(caplog)
    assert len(warned) == 2 and warned[0].startswith("security.find_cache_size")
    assert "security.metrics_port" in warned[1]
    settings = manifest.settings_for(Settings())
    assert (settings.find_cache_size, settings.metrics_port) == (0, 9106)
    assert settings.security.default_identity == "me"
    assert not {"find_cache_size", "metrics_port"} & settings.security.model_dump().keys()
    # a manifest without them leaves the environment's (or the default) alone
    plain = tmp_path / "plain.yaml"
    plain.write_text("security: {default_identity: me}\n")
    assert load_manifest(plain, environ={}).settings_for(Settings(find_cache_size=3)).find_cache_size == 3


def test_an_old_manifest_value_is_checked_and_a_typo_still_refused(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("security: {find_cache_size: -1, metrics_prot: 9105}\n")
    with pytest.raises(ConfigError) as caught:
        load_manifest(bad, environ={})
    assert "security.find_cache_size: Input should be greater than or equal to 0" in str(caught.value)
    assert "security.metrics_prot: unknown key" in str(caught.value)
