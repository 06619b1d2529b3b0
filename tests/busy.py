"""A busy machine on demand: CPU hog processes on every core, bounded in time and always cleaned up.

Timing races (a client's 5 s timeout, a hook's deadline, a handshake answered "at once") hide on a quiet
machine and bite on a laptop that builds code while the agent works. Tests that meet a real client
run twice through the ``machine`` fixture (``tests/e2e/conftest.py``): once as the machine is, once
with ``cpu_hogs`` keeping every core busy for the test's length, so such a race fails a test instead
of a user. The hogs are plain busy loops at normal priority in processes of their own (no GIL shared
with the test); each ends by itself after ``limit_s`` even if the test process dies without cleaning
up, and ``cpu_hogs`` kills them on the way out.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["HOG_LIMIT_S", "cpu_hogs"]

HOG_LIMIT_S = 300.0
"""No hog outlives this, whatever happens to the test that started it."""

_HOG = "import time\nend = time.monotonic() + {limit}\nwhile time.monotonic() < end:\n    pass\n"


@contextmanager
def cpu_hogs(count: int | None = None, limit_s: float = HOG_LIMIT_S) -> Iterator[list[int]]:
    """Keep ``count`` cores (default: all of them) busy while inside; yields the hogs' pids."""
    hogs = [
        subprocess.Popen(
            [sys.executable, "-c", _HOG.format(limit=limit_s)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for _ in range(count or os.cpu_count() or 2)
    ]
    try:
        yield [hog.pid for hog in hogs]
    finally:
        for hog in hogs:
            hog.kill()
        for hog in hogs:
            hog.wait(10)
