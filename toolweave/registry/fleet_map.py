"""The fleet map book: the registry's own request map, refit offline from its traffic and shared by replicas.

Every successful call through the gateway leaves a usage example: the request, then the tool it led to
(``usage_book.py``). ``FleetMapBook.refit`` fits the request map of ``fleet_fit.py`` on those pairs against
the registry's own tool vectors, checks it on requests held out of a first fit (a map that ranks them
worse is not kept), and writes it to the ``fleet_map`` side table in one commit, so every replica loads
it (``Follower.appliers``). It runs on ``toolweave adapt`` or on the schedule ``Settings.fleet_map_refit_s``
(a background thread), never on the call path: a search only multiplies its request vector by the map
it holds (``SnapshotSearch``). ``reset`` deletes the map; ``Settings.fleet_map`` false ignores it.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from toolweave.errors import ToolweaveError
from toolweave.registry.commits import Commits
from toolweave.registry.fleet_fit import TUNING, FitParams, FleetMap, fit_map, mean_average_precision
from toolweave.registry.state import RegistryState
from toolweave.registry.usage import text_key
from toolweave.registry.usage_book import UsageBook
from toolweave.registry.vector_rows import VectorRows

__all__ = ["KIND", "FleetMapBook", "Refit", "RefitSchedule"]

log = logging.getLogger(__name__)

KIND = "fleet_map"
"""The kind of change a refit or reset commits (``changes.py``)."""
_HOLD_OUT = 5
"""One request in this many is held out of the check fit (by a hash of its text: the same every run)."""
_MIN_HELD = 10
"""Fewer held-out requests than this say nothing: the check is skipped."""

Outcome = Literal["fitted", "too few", "unchanged", "no gain"]


@dataclass(frozen=True, slots=True)
class Refit:
    """What a refit did: ``fitted`` (a new map is committed), ``too few`` recorded calls, ``unchanged``
    traffic since the map held, or ``no gain`` (the check fit ranked held-out requests no better)."""

    outcome: Outcome
    examples: int
    requests: int
    tools: int
    before: float = 0.0
    after: float = 0.0
    """Held-out mean average precision without and with the map (``_check``)."""


@dataclass(frozen=True, slots=True)
class _Pairs:
    queries: np.ndarray
    positives: list[list[int]]
    texts: list[str]
    tools: np.ndarray
    ids: list[str]
    """The tool id of each row of ``tools``."""
    examples: int
    fingerprint: str


class FleetMapBook:
    """Loads, refits and resets the registry's fleet map (see the module docstring)."""

    def __init__(
        self,
        state: RegistryState,
        commits: Commits,
        usage: UsageBook,
        vectors: Callable[[], VectorRows],
    ) -> None:
        self._state = state
        self._commits = commits
        self._usage = usage
        self._vectors = vectors
        self._refitting = threading.Lock()
        """One refit at a time in this process (the command and the schedule may meet)."""

    def current(self) -> FleetMap | None:
        return self._state.fleet_map

    def load(self, _keys: list[str] | None = None) -> None:
        """The committed map (the follower calls it): one for another embedding model is not used."""
        state = self._state
        rows = state.db.side.load_fleet_map()
        if not rows:
            state.fleet_map = None
            return
        row = rows[0]
        model, dim = state.embedder.model_id, state.embedder.dim
        if row["model"] != model or row["dim"] != dim:
            log.warning(
                "registry %s: its fleet map was fitted for %s, not %s; not used (run `toolweave adapt`)",
                state.path,
                row["model"],
                model,
            )
            state.fleet_map = None
            return
        w = np.frombuffer(row["matrix"], dtype="<f4").reshape(dim, dim).astype(np.float32)
        state.fleet_map = FleetMap(
            w,
            row["model"],
            int(row["examples"] or 0),
            int(row["requests"] or 0),
            int(row["tools"] or 0),
            int(row["fitted_ns"] or 0),
            row["fingerprint"] or "",
            float(row["before"] or 0.0),
            float(row["after"] or 0.0),
            None if row.get("reached") is None else frozenset(row["reached"]),
        )

    # -- refit and reset -------------------------------------------------------------------------------
    def refit(self, *, force: bool = False, params: FitParams | None = None) -> Refit:
        """Fit the map on the recorded calls and commit it (see ``Refit`` for what may happen instead).
        ``force``: refit even when the traffic is the one the current map was fitted on. ``params``: fit
        with these; by default the fleet tunes its own (``TUNING``: each is checked on the held-out
        requests, the best is fitted on all of them)."""
        with self._refitting:
            return self._refit(force, TUNING if params is None else (params,))

    def _refit(self, force: bool, candidates: Sequence[FitParams]) -> Refit:
        state = self._state
        pairs = self._pairs()
        tools = len({r for rows in pairs.positives for r in rows})
        counts = (pairs.examples, len(pairs.texts), tools)
        if pairs.examples < state.settings.fleet_map_min_examples or len(pairs.texts) < 2:
            return Refit("too few", *counts)
        held = state.fleet_map
        if not force and held is not None and held.fingerprint == pairs.fingerprint:
            return Refit("unchanged", *counts, held.before, held.after)
        params, before, after = _check(pairs, candidates)
        if after < before:
            log.info("registry %s: fleet map not kept: held-out mAP %.4f -> %.4f", state.path, before, after)
            return Refit("no gain", *counts, before, after)
        w = fit_map(pairs.queries, pairs.positives, pairs.tools, params)
        fitted = FleetMap(
            w,
            state.embedder.model_id,
            *counts,
            time.time_ns(),
            pairs.fingerprint,
            before,
            after,
            frozenset(pairs.ids[r] for rows in pairs.positives for r in rows),
        )
        self._commit([_row(fitted)], "fleet map", fitted)
        log.info(
            "registry %s: fleet map fitted on %d calls (%d requests, %d tools); held-out mAP %.4f -> %.4f",
            state.path,
            *counts,
            before,
            after,
        )
        return Refit("fitted", *counts, before, after)

    def reset(self) -> bool:
        """Delete the map (one commit); False when there was none."""
        with self._refitting:
            if self._state.fleet_map is None and not self._state.db.side.load_fleet_map():
                return False
            self._commit([], "fleet map reset", None)
            return True

    def _commit(self, rows: list[dict[str, Any]], action: str, fitted: FleetMap | None) -> None:
        state = self._state
        with state.write_lock, self._commits.writer():
            state.db.side.save_fleet_map(rows)
            state.changes.touch(KIND)
            self._commits.commit(action)
            state.fleet_map = fitted

    def _pairs(self) -> _Pairs:
        """The recorded calls as requests (one per text, every tool it led to a positive) against the
        catalogue's tool vectors. Declared examples are not traffic and are left out."""
        state = self._state
        with state.write_lock:  # a consistent copy of what the flushes wrote
            by_tool = {t: list(e) for t, e in self._usage.by_tool.items()}
        vectors = self._vectors()
        ids = list(vectors)
        row_of = {tool_id: n for n, tool_id in enumerate(ids)}
        requests: dict[str, tuple[np.ndarray, set[int]]] = {}
        seen: list[str] = []
        examples = 0
        for tool_id in sorted(by_tool):
            if tool_id not in row_of:
                continue
            for ex in by_tool[tool_id]:
                if ex.origin != "call":
                    continue
                examples += 1
                key = text_key(ex.query)
                seen.append(f"{tool_id}\x1f{key}\x1f{ex.at_ns}")
                _, golds = requests.setdefault(key, (ex.vector, set()))
                golds.add(row_of[tool_id])
        texts = sorted(requests)
        dim = state.embedder.dim
        queries = (
            np.stack([requests[t][0] for t in texts]).astype(np.float32)
            if texts
            else np.zeros((0, dim), np.float32)
        )
        tools = (
            np.stack([vectors[i] for i in ids]).astype(np.float32) if ids else np.zeros((0, dim), np.float32)
        )
        digest = hashlib.sha256(state.embedder.model_id.encode())
        for line in sorted(seen):
            digest.update(line.encode())
        return _Pairs(
            queries, [sorted(requests[t][1]) for t in texts], texts, tools, ids, examples, digest.hexdigest()
        )


def _check(pairs: _Pairs, candidates: Sequence[FitParams]) -> tuple[FitParams, float, float]:
    """The candidate whose map, fitted on the other requests, ranks the held-out ones best (mean average
    precision; the first on a tie), with that figure without and with it. Too few requests held out to
    say: the first candidate, and the figure of every request, equal without and with."""
    held = [n for n, t in enumerate(pairs.texts) if _bucket(t) == 0]
    kept = [n for n in range(len(pairs.texts)) if _bucket(pairs.texts[n]) != 0]
    if len(held) < _MIN_HELD or len(kept) < _MIN_HELD:
        whole = mean_average_precision(None, pairs.queries, pairs.positives, pairs.tools)
        return candidates[0], whole, whole
    golds = [pairs.positives[n] for n in held]
    before = mean_average_precision(None, pairs.queries[held], golds, pairs.tools)
    best, after = candidates[0], -1.0
    for params in candidates:
        w = fit_map(pairs.queries[kept], [pairs.positives[n] for n in kept], pairs.tools, params)
        figure = mean_average_precision(w, pairs.queries[held], golds, pairs.tools)
        if figure > after:
            best, after = params, figure
    return best, before, after


def _bucket(text: str) -> int:
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "big") % _HOLD_OUT


def _row(fitted: FleetMap) -> dict[str, Any]:
    return {
        "model": fitted.model,
        "dim": int(fitted.w.shape[0]),
        "matrix": np.ascontiguousarray(fitted.w, dtype="<f4").tobytes(),
        "examples": fitted.examples,
        "requests": fitted.requests,
        "tools": fitted.tools,
        "fitted_ns": fitted.fitted_ns,
        "fingerprint": fitted.fingerprint,
        "before": fitted.before,
        "after": fitted.after,
        "reached": None if fitted.reached is None else sorted(fitted.reached),
    }


class RefitSchedule:
    """Refits every ``interval_s`` on a daemon thread (``Settings.fleet_map_refit_s``): the first one an
    interval after start, so opening a registry costs nothing. A failed refit is logged and retried at
    the next tick; the gateway never waits for one."""

    def __init__(self, book: FleetMapBook, interval_s: float) -> None:
        self._book = book
        self._interval_s = interval_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._thread is None and self._interval_s > 0:
            self._thread = threading.Thread(target=self._run, name="toolweave-fleet-map", daemon=True)
            self._thread.start()

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stop.wait(self._interval_s):
            try:
                self._book.refit()
            except ToolweaveError:
                log.warning("fleet map refit failed; will try again", exc_info=True)
            except Exception:  # a bug must not end the schedule: the next tick tries again
                log.exception("fleet map refit failed unexpectedly; will try again")
