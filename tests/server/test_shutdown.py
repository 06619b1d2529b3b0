"""``server/fronts/shutdown.py`` in a process of its own (it signals its children and ends its process): the
deadline stops every child's whole process tree, then ends a process whose main thread is stuck."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.procs import group

pytestmark = pytest.mark.skipif(not Path("/proc/self").exists(), reason="reads the process tree from /proc")

# A process with two children in sessions of their own, one with a grandchild (like npx -> node), whose
# main thread then hangs: only the deadline can end it.
STUCK = """
import json, subprocess, sys, time
from toolweave.server.fronts.shutdown import ExitDeadline, child_pids
SLEEP = "import time; time.sleep(600)"
TREE = f"import subprocess, sys; subprocess.Popen([sys.executable, '-c', {SLEEP!r}]); {SLEEP}"
DEAF = f"import signal; signal.signal(signal.SIGTERM, signal.SIG_IGN); {SLEEP}"
kids = [subprocess.Popen([sys.executable, "-c", code], start_new_session=True) for code in (TREE, DEAF)]
time.sleep(1.0)  # the grandchild starts
print(json.dumps({"children": child_pids(), "groups": [k.pid for k in kids]}), flush=True)
ExitDeadline(0.2, 0.6).start("test")
time.sleep(600)
"""


def test_the_deadline_stops_every_child_tree_and_ends_a_stuck_process() -> None:
    with subprocess.Popen(
        [sys.executable, "-c", STUCK], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    ) as proc:
        assert proc.stdout is not None
        try:
            seen = json.loads(proc.stdout.readline())
            assert proc.wait(30) == 0  # os._exit(0): the stuck main thread did not hold it
        finally:
            if proc.poll() is None:
                proc.kill()
    assert sorted(seen["children"]) == sorted(seen["groups"])
    # every member of both groups is gone: the grandchild too, and the child that ignored SIGTERM
    for pgid in seen["groups"]:
        for _ in range(100):
            if not group(pgid):
                break
            subprocess.run(["sleep", "0.05"], check=True)
        assert not group(pgid), pgid


def test_a_deadline_must_stop_children_before_it_exits() -> None:
    from toolweave.server.fronts.shutdown import ExitDeadline

    with pytest.raises(ValueError, match="stop_children_s <= exit_s"):
        ExitDeadline(2.0, 1.0)


# A process whose registry flush is still running when the deadline comes (a busy machine): the deadline
# waits for it, then ends the process. Before, os._exit cut it and the buffered traffic was lost.
FLUSHING = """
import time
from toolweave.server.fronts.shutdown import ExitDeadline, finishing
with finishing("the registry's last flush"):
    ExitDeadline(0.0, 0.1).start("test")
    time.sleep(1.0)  # the flush, ten times longer than the deadline
    print("flushed", flush=True)
time.sleep(600)  # stuck after it: the deadline still ends the process
"""


def test_the_deadline_lets_the_last_flush_end_then_exits() -> None:
    done = subprocess.run([sys.executable, "-c", FLUSHING], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["flushed"]


def test_served_closes_its_registry_as_work_the_deadline_lets_end() -> None:
    from toolweave.policy import Policy
    from toolweave.server.calls.metrics import GatewayMetrics
    from toolweave.server.fronts import shutdown
    from toolweave.server.served import Served
    from toolweave.settings import SecuritySettings

    held: list[list[str]] = []

    class Registry:  # only what closing reads (the real close flushes: tests/registry/test_usage.py)
        def close(self) -> None:
            held.append(list(shutdown._finishing))

    served = Served(Registry, SecuritySettings(), Policy(), GatewayMetrics())  # type: ignore[arg-type]
    served._registry = Registry()  # type: ignore[assignment]  # as the background start leaves it
    served.close()
    assert held == [["the registry's last flush"]]
