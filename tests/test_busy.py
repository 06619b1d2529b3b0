"""The busy-machine helper (``tests/busy.py``): its hogs run, burn CPU, and never outlive their block."""

from __future__ import annotations

import time
from pathlib import Path

from tests.busy import cpu_hogs
from tests.procs import alive


def _cpu_ticks(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def test_cpu_hogs_burn_cpu_and_are_gone_after_the_block() -> None:
    with cpu_hogs(2) as pids:
        assert len(pids) == 2 and all(alive(pid) for pid in pids)
        deadline = time.monotonic() + 30
        while min(_cpu_ticks(pid) for pid in pids) < 10 and time.monotonic() < deadline:
            time.sleep(0.05)  # a tenth of a CPU second each: they spin
        assert min(_cpu_ticks(pid) for pid in pids) >= 10
    assert not any(alive(pid) for pid in pids)


def test_a_hog_ends_by_itself_at_its_limit() -> None:
    with cpu_hogs(1, limit_s=0.2) as (pid,):
        deadline = time.monotonic() + 30
        while alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not alive(pid)
