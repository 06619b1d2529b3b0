"""The demo manifest's state lives with the registry ``toolweave serve`` uses, not in one fixed file of
the shared temp folder: ``serve`` names the registry's directory in ``TOOLWEAVE_REGISTRY_DIR``
and the demo's memory server writes beside it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from toolweave.commands.serve import REGISTRY_DIR_VAR, _name_registry_dir
from toolweave.manifest import load_manifest
from toolweave.settings import Settings

DEMO = Path(__file__).resolve().parent.parent / "manifests" / "demo.yaml"


def test_serve_names_a_local_registry_directory_and_not_an_object_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(REGISTRY_DIR_VAR, "")  # so that the test's end restores whatever was there
    monkeypatch.delenv(REGISTRY_DIR_VAR)
    _name_registry_dir(Settings(home="s3://bucket/registry"))
    assert REGISTRY_DIR_VAR not in os.environ
    _name_registry_dir(Settings(home=tmp_path / "registry"))
    assert os.environ[REGISTRY_DIR_VAR] == str((tmp_path / "registry").resolve())


def test_the_demo_memory_file_lives_in_the_registry_directory(tmp_path: Path) -> None:
    (memory,) = [b for b in load_manifest(DEMO).backends() if b.name == "memory"]
    config = memory.config.interpolated({REGISTRY_DIR_VAR: str(tmp_path)})
    path = Path(config.env["MEMORY_FILE_PATH"])
    assert path.parent == tmp_path, path
