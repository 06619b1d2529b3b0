"""Tool id → vector over one matrix: how inference reads a registry's vectors.

At 100k tools, a dict of 100k row views cost an ingest twice over: building it, and stacking the rows
back into blocks for the similarity pass. ``VectorRows`` keeps the matrix and an id → row index, and
``stack_rows`` takes a block of rows by fancy indexing.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping, Sequence

import numpy as np

__all__ = ["VectorRows", "stack_rows"]


class VectorRows(Mapping[str, np.ndarray]):
    """Read-only: ``ids[n]``'s vector is ``matrix[n]``. An update keeps the matrix and puts the new
    vectors in a second one beside it: copying 100k vectors per ingest cost more than the lookups."""

    def __init__(self, ids: Sequence[str], matrix: np.ndarray) -> None:
        if len(ids) != len(matrix):
            raise ValueError(f"{len(ids)} ids for {len(matrix)} vectors")
        self._base = matrix
        self._top = matrix[:0]
        self._row = {tool_id: n for n, tool_id in enumerate(ids)}  # rows past the base are the top's

    def __getitem__(self, tool_id: str) -> np.ndarray:
        n = self._row[tool_id]
        row: np.ndarray = self._base[n] if n < len(self._base) else self._top[n - len(self._base)]
        return row

    def __contains__(self, tool_id: object) -> bool:
        return tool_id in self._row

    def __iter__(self) -> Iterator[str]:
        return iter(self._row)

    def __len__(self) -> int:
        return len(self._row)

    def stack(self, ids: Sequence[str]) -> np.ndarray:
        """The vectors of ``ids`` (all held), one row each, as a new matrix."""
        rows = np.fromiter((self._row[i] for i in ids), np.int64, len(ids))
        if not len(self._top):
            stacked: np.ndarray = self._base[rows]
            return stacked
        width = self._top.shape[1]
        out = np.empty((len(ids), width), self._top.dtype)
        below = rows < len(self._base)
        out[below] = self._base[rows[below]]
        out[~below] = self._top[rows[~below] - len(self._base)]
        return out

    def updated(self, changed: Mapping[str, np.ndarray], removed: Collection[str] = ()) -> VectorRows:
        """These vectors after a write: ``changed`` set (new or replaced), ``removed`` gone. The
        replaced and removed rows stay in the matrices, unreferenced."""
        out = VectorRows((), self._base[:0])
        out._base, out._row = self._base, dict(self._row)
        for tool_id in removed:
            out._row.pop(tool_id, None)
        new = list(changed)
        if not new:
            out._top = self._top
            return out
        block = np.stack([changed[i] for i in new])
        out._top = np.concatenate([self._top, block]) if len(self._top) else block
        start = len(self._base) + len(self._top)
        out._row.update((i, start + n) for n, i in enumerate(new))
        return out


def stack_rows(vectors: Mapping[str, np.ndarray], ids: Sequence[str]) -> np.ndarray:
    """``np.stack`` of the vectors of ``ids`` as float32 (by fancy indexing when ``vectors`` is a
    ``VectorRows``)."""
    if isinstance(vectors, VectorRows):
        return np.asarray(vectors.stack(ids), dtype=np.float32)
    return np.stack([np.asarray(vectors[i], dtype=np.float32) for i in ids])
