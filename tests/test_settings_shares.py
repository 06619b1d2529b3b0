"""Weights, shares and confidences (the ``Share`` type) accept 0 to 1 and nothing else."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, ValidationError

from toolweave.settings import RetrievalSettings, Settings

SHARES = {
    RetrievalSettings: ["floor_relative", "floor_absolute", "floor_destructive"],
    Settings: ["usage_weight", "infer_min_confidence"],
}


@pytest.mark.parametrize(("model", "name"), [(m, n) for m, names in SHARES.items() for n in names])
def test_shares_are_bounded_to_0_1(model: type[BaseModel], name: str) -> None:
    assert model.model_fields[name].annotation is float
    for ok in (0.0, 1.0):
        assert getattr(model(**{name: ok}), name) == ok
    for bad in (-0.01, 1.01):
        with pytest.raises(ValidationError, match=name):
            model(**{name: bad})
