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

from labs.supplied import NumberRule, SchemaLookup, Supplied, ValueKind, parameter_shape
from walk_lab import OUT, Query, Recording, hybrid, load, per_set, scores

from toolweave.benchmark.recorded import RecordedGraph
from toolweave.records import DependencyEdge, EdgeKind
from toolweave.retrieval.fusion import turn_relevance
from toolweave.retrieval.results import RankedTool
from toolweave.retrieval.walk import (
    CUT_ORIGINS,
    Choice,
    Chooser,
    WalkPolicy,
    expand_with_dependencies,
    is_content_edge,
)
from toolweave.settings import RetrievalSettings

PARAMS = RetrievalSettings()


@dataclass(frozen=True)
class LabPolicy(WalkPolicy):
    """The product's ``WalkPolicy`` and the variants measured beside it (not shipped):

    - ``kinded_only``: a parameter edge is walked only when the parameter takes a kind of value a user
      rarely types (``labs.supplied.parameter_shape``: ids, dates, times, tokens, paths, URLs, emails,
      coordinates; not numbers); a city, a keyword or a message comes with the request. Learned edges
      are exempt;
    - ``producers_per_parameter``: of a parameter's producers, only the best few (by their own relevance
      in the turn, then confidence);
    - ``placement="after_parent"``: each dependency right after the tool that needs it (the paper's
      order), its weight used only to decide whether it is walked;
    - ``min_confidence``: a dependency reached through inferred edges (``CUT_ORIGINS``) whose confidences
      multiply to less is not walked. The gateway's walk has no such cut: the weight already carries
      every confidence of the path (it was 0.9, with weak inferred edges never given to the walk; walking
      them by weight is as harmless on every dataset and finds ToolLinkOS's prerequisites);
    - ``supplied`` (the request-value rule, ``labs.supplied``): the producer of a parameter whose value
      the request already holds is not walked (0) or weighs that much of its weight; ``supplied_numbers``,
      ``supplied_converters`` and ``supplied_learned`` are ``Supplied``'s ``numbers``, ``converters``
      and ``learned``. ``walker`` gives every walk the query and the recorded tools' schemas
      (``request``, ``schema_of``).
    """

    kinded_only: bool = False
    producers_per_parameter: int | None = None
    placement: Literal["after_parent", "by_weight"] = "by_weight"
    min_confidence: float = 0.0
    supplied: float | None = None
    supplied_numbers: NumberRule = "named"
    supplied_converters: bool = True
    supplied_learned: bool = True
    describe: Callable[[str], object | None] | None = field(default=None, compare=False)
    request: str = field(default="", compare=False)
    """The turn's text (the request-value rule reads it)."""
    schema_of: SchemaLookup | None = field(default=None, compare=False)

    def chooser(self, seen: set[str], relevance: Mapping[str, float]) -> Choice:
        return LabChooser(self, seen, relevance)

    def supplied_by(self) -> Supplied | None:
        """What this turn's request supplies, when the request-value rule is on and the turn is known."""
        if self.supplied is None or not self.request or self.schema_of is None:
            return None
        return Supplied(
            self.request,
            self.schema_of,
            numbers=self.supplied_numbers,
            converters=self.supplied_converters,
            learned=self.supplied_learned,
        )

    def knobs(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self) if f.compare}


class LabChooser(Chooser):
    policy: LabPolicy

    def __init__(self, policy: LabPolicy, seen: set[str], relevance: Mapping[str, float]) -> None:
        super().__init__(policy, seen, relevance)
        self.request = policy.supplied_by()
        self.path_confidence: dict[str, float] = {}
        """Tool → the product of the confidences of the edges the walk reached it by."""
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
        spared: set[int] = set()
        for n, edge in enumerate(edges):
            param = edge.parameter_name
            if param is None:
                kept.append(n)
                continue
            if policy.kinded_only and edge.origin != "learned" and self._kind(tool, param) is None:
                continue
            if policy.skip_content and is_content_edge(edge):
                continue
            if self.request is not None and self.request.spares(edge):
                if not policy.supplied:
                    continue
                spared.add(n)
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
            if n in spared:
                w *= policy.supplied or 1.0
            guessed = edge.origin in CUT_ORIGINS
            path = sure * (edge.confidence if guessed else 1.0)
            floor = policy.inferred_min_weight if guessed else policy.min_weight
            if w >= floor and path >= policy.min_confidence:
                self.path_confidence.setdefault(edge.depends_on, path)
                if policy.placement == "after_parent":
                    self.gate_weight.setdefault(edge.depends_on, w)
                    out.append((edge, weight))  # listed at its parent's weight: right after it
                else:
                    out.append((edge, w))
        return out

    def _kind(self, tool: str, param: str) -> ValueKind | None:
        schema = getattr(self.policy.describe(tool), "input_schema", None) if self.policy.describe else None
        props = schema.get("properties") if isinstance(schema, dict) else None
        spec = props.get(param) if isinstance(props, dict) else None
        kind = parameter_shape(param, spec if isinstance(spec, dict) else None).kind
        return None if kind == "number" else kind


PAPER = LabPolicy(**{f.name: getattr(WalkPolicy.everything(), f.name) for f in fields(WalkPolicy)})
"""The paper's walk (``min_confidence`` off, as in ``LabPolicy``'s default)."""
SHIPPED = LabPolicy()
SUPPLIED = replace(SHIPPED, supplied=0.5, supplied_numbers="named")
"""The request-value rule in the form the leave-one-dataset-out choice picks on every dataset
(bench/HISTORY.md, "The request supplies it"): ``walk_lab.py compare`` shows it beside the shipped walk."""
TRUE_GRAPHS = {
    ("toollinkos", "declared"),
    ("api_bank", "declared"),
    ("openapi_links", "declared"),
    ("nestful", "gold"),
    ("bfcl_multi_turn", "learned"),
}
"""Graphs whose every edge is true (annotated, or read from gold call sequences): grtf ≥ hybrid there."""
CHOICE_GRAPHS = ("declared", "inferred")
"""The graphs a choice is made on: the dataset's own (where it declares one) and what the gateway infers
and walks. Judged only: NESTFUL's ``gold`` graph, and ``inferred_all`` (every edge inference stored,
below the bar too: mostly-wrong edges at honest, low confidences on most fleets)."""
SUPPLIED_CHOICE_GRAPHS = (*CHOICE_GRAPHS, "gold", "learned", "inferred+learned")
"""The request-value grid chooses on NESTFUL's gold graph and BFCL multi-turn's learned graphs too (each
judged out of sample in the fold that leaves its dataset out): they are where the rule can act."""
SHOWCASE_SLACK = 0.0005
"""ToolLinkOS with its declared graph (0.904 mAP@10, three decimals) must not drop: at most this below
the paper's walk on the ``examples`` split (less than the figure's rounding)."""
HARM = -0.005
"""Do no harm: the most mAP@10 a walk may cost against hybrid on a graph that may hold wrong edges."""

_relevance: dict[int, tuple[Query, dict[str, float]]] = {}
"""Each query's ``turn_relevance`` (the query is kept with it: an id is unique only while it lives)."""


def _expand(
    q: Query, deps: RecordedGraph, relevance: dict[str, float], policy: WalkPolicy | None, rec: Recording
) -> list[RankedTool]:
    """The product's walk as the pipeline calls it; a lab policy with the request-value rule on is
    given the request and the tools' schemas."""

    def schema_of(tool_id: str) -> dict[str, object] | None:
        record = rec.records.get(tool_id)
        return record.input_schema if record is not None else None

    if isinstance(policy, LabPolicy) and policy.supplied is not None:
        policy = replace(policy, request=q.text, schema_of=schema_of)
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
        turn = replace(policy, describe=rec.records.get) if policy.kinded_only else policy
        return _expand(q, deps, cached[1], turn, rec)

    return run


def product_walker(q: Query, deps: RecordedGraph, rec: Recording) -> list[RankedTool]:
    """The product's walk with its own defaults (what ``check`` compares with ``retrieve``)."""
    return _expand(q, deps, turn_relevance(q.candidates), None, rec)


_KNOB_ORDER = (
    "supplied",
    "producers_per_parameter",
    "min_weight",
    "placement",
    "confidence_power",
    "alternatives_power",
    "min_confidence",
)


_SUPPLIED_KNOBS = ("supplied", "supplied_numbers", "supplied_converters", "supplied_learned", "skip_content")


def label(policy: LabPolicy) -> str:
    """The grid's name of a policy (its knobs, the paper's walk by name; the request-value grid's by
    its own knobs)."""
    if policy == PAPER:
        return "paper (every edge)"
    if replace(policy, **{k: getattr(SHIPPED, k) for k in _SUPPLIED_KNOBS}) == SHIPPED:
        return " ".join(f"{k}={getattr(policy, k)}" for k in _SUPPLIED_KNOBS)
    return " ".join(f"{k}={getattr(policy, k)}" for k in _KNOB_ORDER)


def supplied_policies() -> list[LabPolicy]:
    """The shipped walk with the request-value rule off, and on in each of its forms: not walked or
    down-weighted (× 0.25, 0.5, 0.75); numbers never, when named, always; converters kept or not; learned
    edges in or out; beside the content-word rule or instead of it."""
    out = [SHIPPED, replace(SHIPPED, skip_content=False)]
    for factor, numbers, converters, learned, content in product(
        (0.0, 0.25, 0.5, 0.75), ("off", "named", "any"), (True, False), (True, False), (True, False)
    ):
        p = replace(
            SHIPPED,
            supplied=factor,
            supplied_numbers=numbers,  # type: ignore[arg-type]
            supplied_converters=converters,
            supplied_learned=learned,
            skip_content=content,
        )
        out.append(p)
    return out


def grid_policies() -> list[LabPolicy]:
    out = [PAPER]
    placements = [("after_parent", 1.0), ("by_weight", 1.0), ("by_weight", 2.0)]
    for supplied, per_param, min_weight, (placement, power), alternatives, sure in product(
        (False, True), (None, 1), (0.0, 0.2, 0.4), placements, (0.0, 1.0), (0.0, 0.75, 0.9)
    ):
        p = LabPolicy(
            supplied=0.0 if supplied else None,
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


def grid(names: list[str], with_test: bool, only_paper: bool = False, supplied: bool = False) -> None:
    """Every policy of the grid on every graph of each dataset; rows saved per dataset as it finishes
    (``OUT/grid[-supplied][-with-test]/NAME.json``: a run that stops keeps what it measured). With
    ``supplied``, the request-value grid (``supplied_policies``), BFCL multi-turn's learned graphs
    included (scored on the measured half: ``walk_lab.with_learned``)."""
    from walk_lab import with_learned

    policies = [PAPER] if only_paper else supplied_policies() if supplied else grid_policies()
    folder = OUT / ("grid" + ("-supplied" if supplied else "") + ("-with-test" if with_test else ""))
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        rec = load(name)
        measured = with_learned(rec) if supplied and name == "bfcl_multi_turn" else None
        _relevance.clear()
        rows: list[dict[str, object]] = []
        base = per_set(rec, scores(rec, "declared", hybrid), with_test)
        if measured is not None:
            base.update(_measured(scores(rec, "declared", hybrid), measured))
        for set_label, m in base.items():
            rows.append(
                {"dataset": name, "set": set_label, "graph": "none", "variant": "hybrid", "map@10": m}
            )
        graphs = ("declared", "inferred", "inferred_all", "gold", "learned", "inferred+learned")
        for graph in [g for g in graphs if _has_edges(rec, g)]:
            t0 = time.perf_counter()
            for policy in policies:
                per_query = scores(rec, graph, walker(policy))
                if "learned" in graph and measured is not None:
                    figures = _measured(per_query, measured)
                    walked = _measured(per_query, measured, column=4)
                else:
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


def _measured(
    per_query: Sequence[tuple[float, ...]], measured: Sequence[bool], column: int = 0
) -> dict[str, float]:
    """A ``scores`` column averaged over BFCL multi-turn's measured half (the learned edges' other half)."""
    return {"queries/measured": fmean(m[column] for m, keep in zip(per_query, measured, strict=True) if keep)}


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


_choice_graphs: tuple[str, ...] = CHOICE_GRAPHS


def _in_choice(dataset: str, unit: tuple[str, str]) -> bool:
    set_label, graph = unit
    return graph in _choice_graphs and not set_label.endswith("/test")


def _admissible(units: Units, datasets: Iterable[str], paper: Units) -> bool:
    """No harm on any choice unit: ≥ hybrid on a true graph, ≥ hybrid − 0.005 elsewhere, and ToolLinkOS's
    declared graph (the method's showcase) not below the reference walk (the paper's; the shipped one in
    the request-value grid)."""
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


def _choose(deltas: dict[str, Units], walked: dict[str, Units], datasets: list[str], paper: Units) -> str:
    """The admissible variant with the best mean gain; among equal gains (to 1e-6), the one that places
    the fewest walked tools in the first 10 over the choice units: when the data cannot tell two walks
    apart, the one that adds less can do less harm elsewhere."""
    ok = [v for v, units in deltas.items() if _admissible(units, datasets, paper)]
    pool = ok or list(deltas)
    return max(pool, key=lambda v: (round(_score(deltas[v], datasets), 6), -_score(walked[v], datasets)))


def lodo(folder: Path, variants: str | None = None) -> None:
    """For each dataset left out, the variant chosen on the others (``_choose``), judged on every unit of
    the one left out (its check-only graphs too); then the choice on every dataset (what ships). Reads
    every ``grid`` file in ``folder``; a request-value grid's (``grid --supplied``) against the shipped
    walk, on ``SUPPLIED_CHOICE_GRAPHS``. ``variants``: a regular expression the variants chosen among
    must match (the reference walk is always kept)."""
    global _choice_graphs
    rows = [r for path in sorted(folder.glob("*.json")) for r in json.loads(path.read_text())]
    if variants is not None:
        keep = re.compile(variants)
        rows = [r for r in rows if r["variant"] in ("hybrid", label(SHIPPED)) or keep.search(r["variant"])]
    deltas, absolute, walked = _deltas(rows)
    supplied = label(PAPER) not in deltas
    _choice_graphs = SUPPLIED_CHOICE_GRAPHS if supplied else CHOICE_GRAPHS
    paper = deltas[label(SHIPPED) if supplied else label(PAPER)]
    datasets = sorted({d for units in deltas.values() for d in units})
    choosing = [d for d in datasets if any(_in_choice(d, u) for u in paper[d])]
    for held_out in [*datasets, None]:
        others = [d for d in choosing if d != held_out]
        chosen = _choose(deltas, walked, others, paper)
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
                    ("shipped_vs_hybrid" if supplied else "paper_vs_hybrid"): round(
                        paper[held_out][(s, g)], 4
                    ),
                }
                for (s, g), delta in deltas[chosen][held_out].items()
            }
        print(json.dumps(row), flush=True)
