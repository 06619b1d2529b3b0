"""The walk grid and its leave-one-dataset-out choice (``bench/walk_lab.py grid`` / ``lodo``).

Every policy of the grid is replayed on every recorded dataset and graph through the product's own walk
(``toolweave.retrieval.walk.expand_with_dependencies``), from the recorded candidates, with the turn's
relevance as the pipeline computes it; ``LabPolicy`` adds the variants that were measured and not
shipped. Units of choice: each dataset × graph that walks
something (``declared`` where the dataset declares edges, ``inferred``), ToolLinkOS
on its ``examples`` split only. Never in a choice set: ToolLinkOS ``test``, NESTFUL's ``gold`` graph
(read from the queries' gold sequences: a check of a true graph, judged out of sample in every fold),
``inferred_all`` (a stress test: judged, never chosen on).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from itertools import product
from pathlib import Path
from statistics import fmean
from typing import Any, Literal

from value_kinds import ValueKind, parameter_kind, request_kinds
from walk_lab import OUT, Query, Recording, hybrid, load, per_set, scores

from toolweave.benchmark.recorded import RecordedGraph
from toolweave.names import name_words
from toolweave.records import DependencyEdge, EdgeKind
from toolweave.retrieval.fusion import turn_relevance
from toolweave.retrieval.results import RankedTool
from toolweave.retrieval.walk import (
    _CUT_ORIGINS,
    Choice,
    WalkPolicy,
    _Chooser,
    expand_with_dependencies,
    is_content_edge,
)
from toolweave.settings import RetrievalSettings

PARAMS = RetrievalSettings()


@dataclass(frozen=True)
class LabPolicy(WalkPolicy):
    """The product's ``WalkPolicy`` and the variants measured beside it (not shipped):

    - ``skip_supplied``: a parameter edge is not walked when the request holds a value of the
      parameter's kind (``value_kinds.request_kinds``), unless the producer takes that kind itself (a
      validator checks the value rather than makes it);
    - ``producers_per_parameter``: of a parameter's producers, only the best few (by their own relevance
      in the turn, then confidence);
    - ``placement="after_parent"``: each dependency right after the tool that needs it (the paper's
      order), its weight used only to decide whether it is walked.

    ``request`` and ``describe`` (the query, the records) are the turn's, set per query by ``walker``.
    """

    skip_supplied: bool = False
    kinded_only: bool = False
    """A parameter edge is walked only when the parameter takes a kind of value a user rarely types
    (``value_kinds.parameter_kind``: ids, dates, tokens, paths, URLs, emails, coordinates); a city, a
    keyword or a message comes with the request. Learned edges are exempt."""
    skip_named_numbers: bool = False
    """A number parameter without a kind is not walked when the request names it and holds a number
    ("a principal of 5000"). Learned edges are exempt."""
    producers_per_parameter: int | None = None
    placement: Literal["after_parent", "by_weight"] = "by_weight"
    request: str = field(default="", compare=False)
    describe: Callable[[str], object | None] | None = field(default=None, compare=False)

    def _chooser(self, seen: set[str], relevance: Mapping[str, float]) -> Choice:
        return _LabChooser(self, seen, relevance)

    def knobs(self) -> dict[str, object]:
        return {f.name: getattr(self, f.name) for f in fields(self) if f.compare}


class _LabChooser(_Chooser):
    policy: LabPolicy

    def __init__(self, policy: LabPolicy, seen: set[str], relevance: Mapping[str, float]) -> None:
        super().__init__(policy, seen, relevance)
        self.supplied = request_kinds(policy.request) if policy.skip_supplied else frozenset()
        self.gate_weight: dict[str, float] = {}
        """``after_parent``: tool → the weight its walk is gated by (the list keeps its parent's)."""

    def __call__(
        self, tool: str, edges: Sequence[DependencyEdge], weight: float
    ) -> list[tuple[DependencyEdge, float]]:
        policy = self.policy
        if not edges:
            return []
        gate = self.gate_weight.get(tool, weight)
        groups: dict[tuple[str, EdgeKind], list[int]] = {}
        kept: list[int] = []
        for n, edge in enumerate(edges):
            param = edge.parameter_name
            if param is None:
                kept.append(n)
                continue
            if policy.skip_supplied and self._supplied(tool, param, edge.depends_on):
                continue
            if policy.kinded_only and edge.origin != "learned" and self._kind(tool, param) is None:
                continue
            if policy.skip_content and is_content_edge(edge):
                continue
            if policy.skip_named_numbers and edge.origin != "learned" and self._named_number(tool, param):
                continue
            groups.setdefault((param, edge.kind), []).append(n)
        share: dict[int, float] = {}
        for members in groups.values():
            if policy.skip_fed and any(edges[n].depends_on in self.seen for n in members):
                continue
            share.update(dict.fromkeys(members, len(members) ** -policy.alternatives_power))
            if policy.producers_per_parameter is None:
                kept.extend(members)
                continue
            best = sorted(
                members,
                key=lambda n: (-self.relevance.get(edges[n].depends_on, 0.0), -edges[n].confidence, n),
            )
            kept.extend(best[: policy.producers_per_parameter])
        out = []
        sure = self.path_confidence.get(tool, 1.0)
        for n in sorted(kept):
            edge = edges[n]
            w = gate * edge.confidence**policy.confidence_power * share.get(n, 1.0)
            path = sure * (edge.confidence if edge.origin in _CUT_ORIGINS else 1.0)
            if w >= policy.min_weight and path >= policy.min_confidence:
                self.path_confidence.setdefault(edge.depends_on, path)
                if policy.placement == "after_parent":
                    self.gate_weight.setdefault(edge.depends_on, w)
                    out.append((edge, weight))  # listed at its parent's weight: right after it
                else:
                    out.append((edge, w))
        return out

    def _named_number(self, tool: str, param: str) -> bool:
        if self._kind(tool, param) is not None:
            return False
        words = name_words(param).split()
        schema = getattr(self.policy.describe(tool), "input_schema", None) if self.policy.describe else None
        props = schema.get("properties") if isinstance(schema, dict) else None
        spec = props.get(param) if isinstance(props, dict) else None
        numeric = isinstance(spec, dict) and spec.get("type") in ("number", "integer")
        if not numeric or _NUMBER.search(self.policy.request) is None:
            return False
        # the request names the quantity ("a principal of 5000"): the number is its value
        said = set(name_words(self.policy.request).split())
        return any(w in said for w in words)

    def _kind(self, tool: str, param: str) -> ValueKind | None:
        kinds = _parameter_kinds(tool, self.policy.describe)
        return kinds[param] if param in kinds else parameter_kind(param)

    def _supplied(self, tool: str, param: str, producer: str) -> bool:
        kind = self._kind(tool, param)
        if kind is None or kind not in self.supplied:
            return False
        return kind not in set(_parameter_kinds(producer, self.policy.describe).values())


def _parameter_kinds(
    tool: str, describe: Callable[[str], object | None] | None
) -> dict[str, ValueKind | None]:
    schema = getattr(describe(tool), "input_schema", None) if describe is not None else None
    props = schema.get("properties") if isinstance(schema, dict) else None
    if not isinstance(props, dict):
        return {}
    return {n: parameter_kind(n, spec if isinstance(spec, dict) else None) for n, spec in props.items()}


_NUMBER = re.compile(r"\d")


PAPER = LabPolicy(**{f.name: getattr(WalkPolicy.everything(), f.name) for f in fields(WalkPolicy)})
SHIPPED = LabPolicy()
TRUE_GRAPHS = {
    ("toollinkos", "declared"),
    ("api_bank", "declared"),
    ("openapi_links", "declared"),
    ("nestful", "gold"),
}
"""Graphs whose every edge is true (annotated, or read from gold call sequences): grtf ≥ hybrid there."""
CHOICE_GRAPHS = ("declared", "inferred")
"""The graphs a choice is made on: the dataset's own (where it declares one) and what the gateway infers
and walks. Judged only: NESTFUL's ``gold`` graph, and ``inferred_all`` (every edge inference stored,
below the bar too: mostly-wrong edges at honest, low confidences on most fleets)."""
SHOWCASE_SLACK = 0.0005
"""ToolLinkOS with its declared graph (0.904 mAP@10, three decimals) must not drop: at most this below
the paper's walk on the ``examples`` split (less than the figure's rounding)."""
HARM = -0.005
"""Do no harm: the most mAP@10 a walk may cost against hybrid on a graph that may hold wrong edges."""

_relevance: dict[int, tuple[Query, dict[str, float]]] = {}
"""Each query's ``turn_relevance`` (the query is kept with it: an id is unique only while it lives)."""


def _expand(
    q: Query, deps: RecordedGraph, relevance: dict[str, float], policy: WalkPolicy | None
) -> list[RankedTool]:
    return expand_with_dependencies(
        q.candidates,
        deps,
        top_k=PARAMS.top_k,
        final_k=PARAMS.final_k,
        d_limit=PARAMS.d_limit,
        edge_kinds=tuple(PARAMS.edge_kinds),
        relevance=relevance,
        policy=policy,
    )


def walker(policy: LabPolicy):  # type: ignore[no-untyped-def]
    def run(q: Query, deps: RecordedGraph, rec: Recording) -> list[RankedTool]:
        cached = _relevance.get(id(q))
        if cached is None or cached[0] is not q:
            cached = _relevance[id(q)] = (q, turn_relevance(q.candidates))
        reads = policy.skip_supplied or policy.kinded_only or policy.skip_named_numbers
        turn = replace(policy, request=q.text, describe=rec.records.get) if reads else policy
        return _expand(q, deps, cached[1], turn)

    return run


def product_walker(q: Query, deps: RecordedGraph, rec: Recording) -> list[RankedTool]:
    """The product's walk with its own defaults (what ``check`` compares with ``retrieve``)."""
    return _expand(q, deps, turn_relevance(q.candidates), None)


_KNOB_ORDER = (
    "skip_supplied",
    "producers_per_parameter",
    "min_weight",
    "placement",
    "confidence_power",
    "alternatives_power",
    "min_confidence",
)


def label(policy: LabPolicy) -> str:
    """The grid's name of a policy (its knobs, the paper's walk by name)."""
    if policy == PAPER:
        return "paper (every edge)"
    return " ".join(f"{k}={getattr(policy, k)}" for k in _KNOB_ORDER)


def grid_policies() -> list[LabPolicy]:
    out = [PAPER]
    placements = [("after_parent", 1.0), ("by_weight", 1.0), ("by_weight", 2.0)]
    for supplied, per_param, min_weight, (placement, power), alternatives, sure in product(
        (False, True), (None, 1), (0.0, 0.2, 0.4), placements, (0.0, 1.0), (0.0, 0.75, 0.9)
    ):
        p = LabPolicy(
            skip_supplied=supplied,
            producers_per_parameter=per_param,
            min_weight=min_weight,
            placement=placement,  # type: ignore[arg-type]
            confidence_power=power,
            alternatives_power=alternatives,
            min_confidence=sure,
            skip_fed=True,
        )
        out.append(p)
    return out


def _has_edges(rec: Recording, graph: str) -> bool:
    return any(rec.graphs.get(graph, {}).values())


def grid(names: list[str], with_test: bool, only_paper: bool = False) -> None:
    """Every policy of the grid on every graph of each dataset; rows saved per dataset as it finishes
    (``OUT/grid[-with-test]/NAME.json``: a run that stops keeps what it measured)."""
    policies = [PAPER] if only_paper else grid_policies()
    folder = OUT / ("grid-with-test" if with_test else "grid")
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        rec = load(name)
        _relevance.clear()
        rows: list[dict[str, object]] = []
        base = per_set(rec, scores(rec, "declared", hybrid), with_test)
        for set_label, m in base.items():
            rows.append(
                {"dataset": name, "set": set_label, "graph": "none", "variant": "hybrid", "map@10": m}
            )
        for graph in [g for g in ("declared", "inferred", "inferred_all", "gold") if _has_edges(rec, g)]:
            t0 = time.perf_counter()
            for policy in policies:
                per_query = scores(rec, graph, walker(policy))
                figures = per_set(rec, per_query, with_test)
                walked = per_set(rec, per_query, with_test, column=4)
                for set_label, m in figures.items():
                    row = {
                        "dataset": name,
                        "set": set_label,
                        "graph": graph,
                        "variant": label(policy),
                        "map@10": m,
                        "walked": walked[set_label],
                    }
                    rows.append(row)
            print(
                json.dumps({"dataset": name, "graph": graph, "seconds": round(time.perf_counter() - t0, 1)}),
                flush=True,
            )
        path = folder / f"{name}.json"
        if only_paper:  # the paper's rows replace those of an earlier run, the grid's stay
            kept = [r for r in json.loads(path.read_text()) if r["variant"] != label(PAPER)]
            rows = kept + [r for r in rows if r["variant"] != "hybrid"]
        path.write_text(json.dumps(rows))


Units = dict[str, dict[tuple[str, str], float]]
"""dataset → (set, graph) → Δ mAP@10 against hybrid."""


def _deltas(rows: list[dict[str, Any]]) -> tuple[dict[str, Units], dict[str, Units], dict[str, Units]]:
    """variant → dataset → (set, graph) → Δ mAP@10 against hybrid; the same for the absolute mAP@10;
    the same for the tools the walk placed in the first 10."""
    hyb = {(r["dataset"], r["set"]): float(r["map@10"]) for r in rows if r["variant"] == "hybrid"}
    deltas: dict[str, Units] = {}
    absolute: dict[str, Units] = {}
    walked: dict[str, Units] = {}
    for r in rows:
        if r["variant"] == "hybrid":
            continue
        d, unit, v = str(r["dataset"]), (str(r["set"]), str(r["graph"])), str(r["variant"])
        deltas.setdefault(v, {}).setdefault(d, {})[unit] = float(r["map@10"]) - hyb[(d, unit[0])]
        absolute.setdefault(v, {}).setdefault(d, {})[unit] = float(r["map@10"])
        walked.setdefault(v, {}).setdefault(d, {})[unit] = float(r["walked"])
    return deltas, absolute, walked


def _in_choice(dataset: str, unit: tuple[str, str]) -> bool:
    set_label, graph = unit
    return graph in CHOICE_GRAPHS and not set_label.endswith("/test")


def _admissible(units: Units, datasets: Iterable[str], paper: Units) -> bool:
    """No harm on any choice unit: ≥ hybrid on a true graph, ≥ hybrid − 0.005 elsewhere, and ToolLinkOS's
    declared graph (the method's showcase) not below the paper's walk."""
    for d in datasets:
        for unit, delta in units[d].items():
            if not _in_choice(d, unit):
                continue
            floor = 0.0 if (d, unit[1]) in TRUE_GRAPHS else HARM
            if delta < floor - 1e-9:
                return False
            if (d, unit[1]) == ("toollinkos", "declared") and delta < paper[d][unit] - SHOWCASE_SLACK:
                return False
    return True


def _score(units: Units, datasets: Iterable[str]) -> float:
    """Mean gain over hybrid, each dataset weighing the same (its choice units averaged)."""
    per = [[v for u, v in units[d].items() if _in_choice(d, u)] for d in datasets]
    return fmean(fmean(p) for p in per if p)


def _choose(deltas: dict[str, Units], walked: dict[str, Units], datasets: list[str]) -> str:
    """The admissible variant with the best mean gain; among equal gains (to 1e-6), the one that places
    the fewest walked tools in the first 10 over the choice units: when the data cannot tell two walks
    apart, the one that adds less can do less harm elsewhere."""
    paper = deltas[label(PAPER)]
    ok = [v for v, units in deltas.items() if _admissible(units, datasets, paper)]
    pool = ok or list(deltas)
    return max(pool, key=lambda v: (round(_score(deltas[v], datasets), 6), -_score(walked[v], datasets)))


def lodo(folder: Path) -> None:
    """For each dataset left out, the variant chosen on the others (``_choose``), judged on every unit of
    the one left out (its check-only graphs too); then the choice on every dataset (what ships). Reads
    every ``grid`` file in ``folder``."""
    rows = [r for path in sorted(folder.glob("*.json")) for r in json.loads(path.read_text())]
    deltas, absolute, walked = _deltas(rows)
    paper = deltas[label(PAPER)]
    datasets = sorted({d for units in deltas.values() for d in units})
    choosing = [d for d in datasets if any(_in_choice(d, u) for u in paper[d])]
    for held_out in [*datasets, None]:
        others = [d for d in choosing if d != held_out]
        chosen = _choose(deltas, walked, others)
        row: dict[str, object] = {
            "left_out": held_out or "(none: every dataset)",
            "chosen": chosen,
            "admissible_in_sample": _admissible(deltas[chosen], others, paper),
            "in_sample_mean_gain": round(_score(deltas[chosen], others), 4),
        }
        if held_out:
            row["out_of_sample"] = {
                f"{s}@{g}": {
                    "map@10": round(absolute[chosen][held_out][(s, g)], 4),
                    "vs_hybrid": round(delta, 4),
                    "paper_vs_hybrid": round(paper[held_out][(s, g)], 4),
                }
                for (s, g), delta in deltas[chosen][held_out].items()
            }
        print(json.dumps(row), flush=True)
