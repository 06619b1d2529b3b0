"""``VectorRows``: a registry's vectors as one matrix, read like a dict."""

from __future__ import annotations

import numpy as np
import pytest

from toolweave.registry.vector_rows import VectorRows, stack_rows


def rows() -> VectorRows:
    return VectorRows(["a", "b", "c"], np.arange(6, dtype=np.float32).reshape(3, 2))


def test_reads_like_a_dict_of_rows() -> None:
    v = rows()
    assert list(v) == ["a", "b", "c"] and len(v) == 3 and "b" in v and "z" not in v
    assert v["b"].tolist() == [2.0, 3.0]
    with pytest.raises(KeyError):
        v["z"]
    with pytest.raises(ValueError, match="2 ids for 3 vectors"):
        VectorRows(["a", "b"], np.zeros((3, 2), np.float32))


def test_stacks_rows_in_the_order_asked_like_np_stack() -> None:
    v = rows()
    assert stack_rows(v, ["c", "a"]).tolist() == [[4.0, 5.0], [0.0, 1.0]]
    as_dict = {k: v[k] for k in v}
    assert np.array_equal(stack_rows(as_dict, ["c", "a"]), stack_rows(v, ["c", "a"]))


def test_an_update_sets_new_and_changed_vectors_and_drops_removed_ones() -> None:
    v = rows()
    after = v.updated({"b": np.array([9.0, 9.0], np.float32), "d": np.array([7.0, 7.0], np.float32)}, {"a"})
    assert {k: after[k].tolist() for k in after} == {"b": [9.0, 9.0], "c": [4.0, 5.0], "d": [7.0, 7.0]}
    assert stack_rows(after, ["d", "c", "b"]).tolist() == [[7.0, 7.0], [4.0, 5.0], [9.0, 9.0]]
    assert v["b"].tolist() == [2.0, 3.0] and "a" in v  # the original is left as it was
    assert dict(v.updated({}, ())).keys() == dict(v).keys()


def test_an_empty_registrys_vectors_take_the_width_of_the_first_ones() -> None:
    empty = VectorRows([], np.zeros((0, 1), np.float32))  # what an empty snapshot holds
    first = empty.updated({"a": np.ones(4, np.float32)})
    assert first["a"].tolist() == [1.0] * 4 and len(first) == 1
