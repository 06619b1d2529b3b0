"""Value flow in a replay, and learned edges scored against it (for bench/bfcl_replay.py).

A **value-flow pair** ``consumer.param ← producer``: a gold call's argument value appeared in the result
of an earlier call of the same dialogue (same session). The rule, chosen to drop coincidences of common
values (it finds 281 calls and 67 pairs over the 200 dialogues; the dataset README counts 279 and 67):

* values are compared as atoms: an argument that is a list (``mean(numbers=[...])``) or an object is
  looked into, and so is every result (dict values, list items, nested); dict keys are not values;
* an atom counts only if it is specific: not None, not a boolean, a number with ``|x| >= 2`` (0, 1, -1
  and 0.5 are everywhere), a string of at least 3 characters once stripped; numbers compare as numbers
  (``5 == 5.0``), strings exactly;
* the producer is the *latest* earlier call whose result held the value (the one a model would copy
  from); each parameter of a call counts once (its first atom with a producer).

**Learned edges** are read from ``toolweave graph export --format json``: every edge whose ``origin`` is
not one the gateway had before learning existed (``declared``, ``manifest``, ``inferred``). An edge
``tool ← depends_on`` with ``parameter_name`` p is the pair ``tool.p ← depends_on``; an edge without a
parameter matches any parameter of that consumer/producer pair. Only edges at or above the walk's
confidence bar are scored (``min_confidence``); all of them are counted too.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

TOOLWEAVE = str(Path(sys.executable).parent / "toolweave")
KNOWN_ORIGINS = frozenset({"declared", "manifest", "inferred"})

Pair = tuple[str, str, str]
"""(consumer tool, consumer parameter, producer tool), tools by their bare BFCL names."""


def atoms(value: Any) -> Iterator[Any]:
    if isinstance(value, Mapping):
        for v in value.values():
            yield from atoms(v)
    elif isinstance(value, list | tuple):
        for v in value:
            yield from atoms(v)
    else:
        yield value


def specific(value: Any) -> bool:
    """Whether ``value`` says enough to be evidence (see the module docstring)."""
    if value is None or isinstance(value, bool):
        return False
    if isinstance(value, int | float):
        return abs(value) >= 2
    return isinstance(value, str) and len(value.strip()) >= 3


def _key(value: Any) -> tuple[str, Any]:
    return ("n", float(value)) if isinstance(value, int | float) else ("s", value)


@dataclass(frozen=True)
class CallRecord:
    """One gold call as replayed: the tool, its arguments and the result the gateway handed back
    (None when the call failed)."""

    tool: str
    arguments: Mapping[str, Any]
    result: Mapping[str, Any] | None


def flow_pairs(calls: Sequence[CallRecord]) -> list[tuple[int, Pair]]:
    """The value-flow pairs of one dialogue's calls, in call order, each with the index of its
    consumer call (one pair per call and parameter at most)."""
    seen: dict[tuple[str, Any], str] = {}
    out: list[tuple[int, Pair]] = []
    for i, call in enumerate(calls):
        for param, value in call.arguments.items():
            producer = next((seen[k] for a in atoms(value) if specific(a) and (k := _key(a)) in seen), None)
            if producer is not None:
                out.append((i, (call.tool, param, producer)))
        if call.result is not None:
            for a in atoms(call.result):
                if specific(a):
                    seen[_key(a)] = call.tool
    return out


@dataclass
class FlowTable:
    """Value-flow pairs over many dialogues: how often each occurs, and in how many dialogues."""

    count: Counter[Pair]
    dialogues: Counter[Pair]
    calls_with_flow: int

    @classmethod
    def of(cls, replays: Iterable[Sequence[CallRecord]]) -> FlowTable:
        """The table of every dialogue's calls in ``replays``."""
        count: Counter[Pair] = Counter()
        dialogues: Counter[Pair] = Counter()
        calls = 0
        for calls_of_dialogue in replays:
            found = flow_pairs(calls_of_dialogue)
            count.update(pair for _, pair in found)
            dialogues.update({pair for _, pair in found})
            calls += len({i for i, _ in found})
        return cls(count, dialogues, calls)

    def rows(self) -> list[dict[str, Any]]:
        return [
            {"consumer": c, "parameter": p, "producer": q, "count": n, "dialogues": self.dialogues[(c, p, q)]}
            for (c, p, q), n in sorted(self.count.items(), key=lambda kv: (-kv[1], kv[0]))
        ]


# -- learned edges -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class LearnedEdge:
    consumer: str
    parameter: str | None
    producer: str
    confidence: float
    origin: str
    kind: str


def export_graph(registry: Path) -> dict[str, Any]:
    """The registry's graph as ``toolweave graph export --format json`` writes it (nodes and edges)."""
    done = subprocess.run(
        [TOOLWEAVE, "graph", "export", "--format", "json", "--registry", str(registry)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if done.returncode != 0:
        raise RuntimeError(f"toolweave graph export failed ({done.returncode}): {done.stderr[-2000:]}")
    doc: dict[str, Any] = json.loads(done.stdout)
    return doc


def learned_edges(graph: Mapping[str, Any], bare: Mapping[str, str]) -> list[LearnedEdge]:
    """Edges of an origin that is not ``KNOWN_ORIGINS``; tool ids mapped to bare names by ``bare``."""
    out = []
    for e in graph.get("edges", []):
        if e.get("origin") in KNOWN_ORIGINS:
            continue
        out.append(
            LearnedEdge(
                consumer=bare.get(e["tool"], e["tool"]),
                parameter=e.get("parameter_name") or None,
                producer=bare.get(e["depends_on"], e["depends_on"]),
                confidence=float(e.get("confidence", 1.0)),
                origin=str(e.get("origin")),
                kind=str(e.get("kind")),
            )
        )
    return out


def origins(graph: Mapping[str, Any]) -> dict[str, int]:
    return dict(Counter(str(e.get("origin")) for e in graph.get("edges", [])))


def _matches(edge: LearnedEdge, pair: Pair) -> bool:
    consumer, param, producer = pair
    return (
        edge.consumer == consumer
        and edge.producer == producer
        and (edge.parameter is None or edge.parameter == param)
    )


def score_learned(
    edges: Iterable[LearnedEdge],
    measured: FlowTable,
    learning: FlowTable,
    *,
    min_confidence: float,
    min_learning_dialogues: int = 2,
) -> dict[str, Any]:
    """Precision of the learned edges against the measured half's value-flow pairs, and their recall
    of the measured pairs that also occur in ``min_learning_dialogues`` learning dialogues or more (the
    ones a learner could have learned). ``oracle``: the same scores for a learner that kept exactly
    the learning half's pairs seen in that many dialogues (the ceiling of counting sessions)."""
    every = list(edges)
    scored = [e for e in every if e.confidence >= min_confidence]
    truth = set(measured.count)
    learnable = {p for p in truth if learning.dialogues[p] >= min_learning_dialogues}

    def scores(chosen: Sequence[LearnedEdge]) -> dict[str, Any]:
        right = [e for e in chosen if any(_matches(e, p) for p in truth)]
        found = {p for p in learnable if any(_matches(e, p) for e in chosen)}
        return {
            "edges": len(chosen),
            "true": len(right),
            "precision": len(right) / len(chosen) if chosen else None,
            "recall": len(found) / len(learnable) if learnable else None,
            "recalled": len(found),
        }

    oracle = [
        LearnedEdge(c, p, q, 1.0, "oracle", "PARAMETER_DIRECTLY_DEPENDS_ON")
        for (c, p, q), n in learning.dialogues.items()
        if n >= min_learning_dialogues
    ]
    return {
        "min_confidence": min_confidence,
        "measured_pairs": len(truth),
        "learnable_pairs": len(learnable),
        "learned_all_confidences": len(every),
        **scores(scored),
        "oracle": scores(oracle),
    }
