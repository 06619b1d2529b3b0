"""How a tool's usage vector (Tool2Vec: the mean of the requests that led to it) meets a request's scores.

NumPy only (``usage.py`` needs pyarrow for its table's schema): a starting gateway's ready table
(``server/turns/ready_rank.py``) fuses usage vectors as the registry does, before pyarrow or LanceDB is
imported.
"""

from __future__ import annotations

import numpy as np

__all__ = ["fuse_usage"]


def fuse_usage(scores: np.ndarray, rows: np.ndarray, usage: np.ndarray, weight: float) -> np.ndarray:
    """Fuse the usage scores of the tools in ``rows`` into ``scores`` (text cosines of every tool), in place.

    Query-to-query cosines run higher than query-to-document ones, so raw usage scores would lift every
    tool that has examples over every tool that has none (measured: the tools a gateway has called
    would crowd out the rest). The usage scores are first put on the text scores' scale for this query
    (same mean and spread), then blended; a tool never scores below its text score.
    """
    text = scores[rows]
    if usage.size >= 2:
        spread = float(usage.std()) or 1.0
        usage = (usage - usage.mean()) / spread * float(scores.std()) + float(scores.mean())
    scores[rows] = np.maximum(text, (1.0 - weight) * text + weight * usage)
    return scores
