"""Prompt shutdown: once its client has left (stdio) or it was told to stop (HTTP: SIGTERM, Ctrl-C), the
gateway process is gone within a bounded time, and so is every upstream server it started.

The orderly way out is the usual one: the backends' owner tasks are cancelled, each upstream's stdin is
closed and the SDK waits for it to exit, the registry is closed. On a busy machine that alone can take
seconds (an upstream interpreter exiting, the SDK's 2 s grace before it signals one, then the Python
interpreter's own teardown of LanceDB, ONNX Runtime and the frozen heap). A client that closed stdin
has nothing more to wait for, and a service manager sends SIGKILL after its own grace period. So
``ExitDeadline``, started at the moment the client left or the signal came, runs on a thread of its
own (the event loop may be the thing that is late):

* at ``stop_children_s`` it sends SIGTERM to the process group of every child still running (each
  stdio upstream is started in a session of its own, so its group is its whole tree: ``npx`` and the
  ``node`` under it), and SIGKILL to what is left shortly after;
* at ``exit_s`` it flushes the logs and ends the process (``os._exit``), whatever is still running,
  except work that loses data when cut (``finishing``: the registry's last flush of buffered usage
  examples and traffic evidence), which it waits for, up to ``FINISH_WAIT_S`` more. Cutting that flush
  lost everything learned since the last periodic one (a busy machine: BFCL's learned edges fell from
  52 to 27 when the learning gateway's stop took longer than 4.5 s).

When the orderly path finishes first, the command ends the process the same way (``exit_now``): the
interpreter's teardown has nothing left to do that anyone waits for.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

__all__ = [
    "FINISH_WAIT_S",
    "QUIET_WHILE_STOPPING",
    "STOPPING",
    "ExitDeadline",
    "child_pids",
    "exit_now",
    "finishing",
    "stop_children",
]

log = logging.getLogger(__name__)

FINISH_WAIT_S = 20.0
"""How much longer than its ``exit_s`` the deadline waits for ``finishing`` work (a flush waits at most
``FLUSH_LEASE_WAIT_S``, 10 s, for another process's write, then writes for seconds); below the 30 s a
service manager or the BFCL replay gives before SIGKILL."""
KILL_AFTER_TERM_S = 0.2
"""After SIGTERM, how long a child's process group has before SIGKILL."""


def child_pids(pid: int | None = None) -> list[int]:
    """The live child processes of ``pid`` (default: this process)."""
    parent = os.getpid() if pid is None else pid
    if Path("/proc/self").exists():
        children = []
        for entry in Path("/proc").glob("[0-9]*"):
            try:
                text = (entry / "stat").read_text()
            except OSError:
                continue
            fields = text[text.rindex(")") + 2 :].split()  # after "(comm)", which may hold spaces
            if int(fields[1]) == parent and fields[0] not in ("Z", "X"):
                children.append(int(entry.name))
        return children
    try:  # systems without procfs (macOS)
        out = subprocess.run(["ps", "-A", "-o", "pid=,ppid="], capture_output=True, text=True, timeout=2)
    except (OSError, subprocess.SubprocessError):
        return []
    pairs = (line.split() for line in out.stdout.splitlines())
    return [int(p) for p, pp in (pair for pair in pairs if len(pair) == 2) if int(pp) == parent]


def _signal_tree(pid: int, sig: int) -> None:
    """``sig`` to the process group ``pid`` leads (its whole tree), else to ``pid`` alone."""
    try:
        if os.getpgid(pid) == pid:
            os.killpg(pid, sig)
        else:
            os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def stop_children(grace_s: float = KILL_AFTER_TERM_S) -> list[int]:
    """SIGTERM every child's process tree, then SIGKILL what is still there after ``grace_s``; returns
    the children that were signalled."""
    children = child_pids()
    for pid in children:
        _signal_tree(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while children and time.monotonic() < deadline:
        time.sleep(0.02)
        children = [pid for pid in children if pid in child_pids()]
    for pid in children:
        _signal_tree(pid, signal.SIGKILL)
    return children


def exit_now(code: int = 0) -> None:
    """End the process at once: logs and standard streams flushed, no interpreter teardown."""
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed pipe: nothing more can be said on it
            stream.flush()
    os._exit(code)


_FINISHING = threading.Condition()
_finishing: list[str] = []


@contextlib.contextmanager
def finishing(what: str) -> Iterator[None]:
    """Work the exit deadline lets end (up to ``FINISH_WAIT_S`` past it): what would lose data if cut."""
    with _FINISHING:
        _finishing.append(what)
    try:
        yield
    finally:
        with _FINISHING:
            _finishing.remove(what)
            _FINISHING.notify_all()


def _wait_finishing(timeout: float) -> list[str]:
    """Wait until no ``finishing`` work is left, at most ``timeout``; what is still running then."""
    with _FINISHING:
        if _finishing:
            log.info("waiting for %s before exiting", ", ".join(_finishing))
            _FINISHING.wait_for(lambda: not _finishing, timeout)
        return list(_finishing)


STOPPING = threading.Event()
"""Set once the process is on its way out: what stops meanwhile (upstreams) is no news for the log."""

QUIET_WHILE_STOPPING = ("mcp.server.streamable_http", "mcp.server.streamable_http_manager")
"""The SDK's loggers that say, at INFO, that each open session is terminated and the manager stops."""


class ExitDeadline:
    """Bounds the way out (module docstring). ``start`` may be called from any thread, more than once."""

    def __init__(self, stop_children_s: float, exit_s: float) -> None:
        if not 0 <= stop_children_s <= exit_s:
            raise ValueError("ExitDeadline: expected 0 <= stop_children_s <= exit_s")
        self.stop_children_s = stop_children_s
        self.exit_s = exit_s
        self._started = threading.Event()

    def start(self, reason: str) -> None:
        if self._started.is_set():
            return
        self._started.set()
        log.info("%s: stopping (at most %.1f s)", reason, self.exit_s)
        STOPPING.set()
        for name in QUIET_WHILE_STOPPING:  # one line for the stop, not one per open session
            logging.getLogger(name).setLevel(logging.WARNING)
        began = time.monotonic()
        threading.Thread(target=self._run, args=(began,), name="toolweave-exit", daemon=True).start()

    def _run(self, began: float) -> None:
        time.sleep(max(0.0, began + self.stop_children_s - time.monotonic()))
        stopped = stop_children()
        if stopped:
            log.warning("upstream processes still running after %.1f s were stopped", self.stop_children_s)
        time.sleep(max(0.0, began + self.exit_s - time.monotonic()))
        unfinished = _wait_finishing(FINISH_WAIT_S)
        if unfinished:
            log.warning(
                "the orderly shutdown took longer than %.1f s: exiting now, %s cut",
                self.exit_s + FINISH_WAIT_S,
                ", ".join(unfinished),
            )
        else:
            log.warning("the orderly shutdown took longer than %.1f s: exiting now", self.exit_s)
        exit_now()
