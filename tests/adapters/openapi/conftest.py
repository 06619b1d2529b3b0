"""Fixtures of the OpenAPI adapter tests: dataset folders (skipped when absent) and spec writers."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

DATASETS = Path(__file__).resolve().parents[3] / ".." / "shared" / "datasets"


def _dataset(name: str) -> Path:
    path = (DATASETS / name).resolve()
    if not path.is_dir():
        pytest.skip(f"dataset folder {path} is absent (../shared/datasets beside the repository)")
    return path


@pytest.fixture(scope="session")
def vendor_specs_dir() -> Path:
    return _dataset("openapi_specs") / "specs"


@pytest.fixture(scope="session")
def links_dir() -> Path:
    return _dataset("openapi_links")


@pytest.fixture
def write_spec(tmp_path: Path) -> Callable[..., Path]:
    """``write_spec(doc, name="spec.yaml")`` writes a dict (as YAML or JSON by suffix) or raw text."""

    def write(doc: dict[str, Any] | str, name: str = "spec.yaml") -> Path:
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(doc, str):
            path.write_text(doc)
        elif name.endswith(".json"):
            path.write_text(json.dumps(doc))
        else:
            path.write_text(yaml.safe_dump(doc, sort_keys=False))
        return path

    return write
