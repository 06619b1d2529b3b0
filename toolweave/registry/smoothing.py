"""Graph-smoothed tool vectors (Tool Graph Retriever): the vector first pass ranks tools by vectors that
also carry the meaning of what they depend on.

``v_i' = normalise(v_i + beta * mean(v_j for j in the tools i depends on))``, one hop, over the edges
retrieval walks (declared and manifest edges, inferred ones of at least ``infer_min_confidence``).
A tool that depends on nothing keeps its vector. The smoothed matrix is used for vector ranking only:
the stored vectors, inference's similarity pass and ``Registry.vectors`` stay the tools' own.

Measured leave-one-dataset-out (``bench/smoothing_lab.py``, bench/RESULTS.md "Graph-smoothed tool
vectors"): smoothing towards a tool's dependencies (``out``), beta 0.35, over the walked edges only.
The other directions gained less (a prerequisite borrowing its dependents' meaning, TGR's hope, did
little: the walk already brings prerequisites), and smoothing over every stored inferred edge made the
tools of Seal-Tools that share a weak prerequisite alike (up to -0.007 mAP@10).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from toolweave.records import DependencyEdge

if TYPE_CHECKING:
    from toolweave.registry.snapshot import Snapshot

__all__ = ["smooth_rows", "with_smoothing"]

_CHUNK = 8192
"""Edges summed at a time (8192 neighbour rows of 384 floats: 12 MB of scratch)."""


def smooth_rows(matrix: np.ndarray, pairs: Iterable[tuple[int, int]], beta: float) -> np.ndarray:
    """``matrix`` with each row that has neighbours replaced by ``normalise(row + beta * mean of its
    neighbours' rows)``; ``pairs`` are ``(row, neighbour row)`` (repeats and self-pairs ignored). A new
    matrix; rows without neighbours are copied unchanged."""
    out = np.array(matrix, dtype=np.float32, copy=True)
    unique = {(a, b) for a, b in pairs if a != b}
    if not unique or beta <= 0:
        return out
    edges = np.array(sorted(unique), dtype=np.int64)
    sums = np.zeros_like(out)
    for start in range(0, len(edges), _CHUNK):  # bounded scratch: one neighbour row per edge
        chunk = edges[start : start + _CHUNK]
        np.add.at(sums, chunk[:, 0], matrix[chunk[:, 1]])
    counts = np.bincount(edges[:, 0], minlength=len(out))
    touched = np.flatnonzero(counts)
    mixed = matrix[touched] + beta * sums[touched] / counts[touched, None]
    norms = np.linalg.norm(mixed, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    out[touched] = mixed / norms
    return out


def with_smoothing(
    snap: Snapshot, dependencies: Callable[[str], Sequence[DependencyEdge]], beta: float
) -> Snapshot:
    """``snap`` whose ``smoothed`` matrix follows ``dependencies`` (the walkable edges of each tool);
    None (rank the tools' own vectors) when ``beta`` is 0, the registry searches through its ANN index
    (no matrix in memory) or no tool depends on another."""
    if beta <= 0 or snap.ann or not snap.ids:
        return replace(snap, smoothed=None)
    row = snap.row_of
    pairs = [
        (n, row[e.depends_on])
        for n, tool_id in enumerate(snap.ids)
        for e in dependencies(tool_id)
        if e.depends_on in row
    ]
    return replace(snap, smoothed=smooth_rows(snap.matrix, pairs, beta) if pairs else None)
