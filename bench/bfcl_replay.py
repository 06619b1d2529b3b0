"""BFCL multi-turn replayed through a real `toolweave serve`: turn retrieval, whether the next gold tool
is already published when the model calls it, and learned dependency edges against the calls' value flow.

    .venv/bin/pip install -e '.[bench]'    # mpmath, which the MathAPI backend needs (bench only)
    .venv/bin/python bench/bfcl_replay.py [--phases cold,warm] [--graphs none,inferred]
        [--methods hybrid,grtf] [--dialogues N | 0,1,multi_turn_base_7,...] [--no-probe] [--measure PHASES]
        [--reuse KEPT_DIR] [--offline | --no-offline] [--min-confidence 0.5] [--frozen] [--max-tools N]
        [--json]

What runs (every part real):
* the 8 backend classes of ``../shared/datasets/bfcl_multi_turn/executable`` as MCP servers over
  streamable HTTP in this process (``bench/bfcl_servers.py``), reset to each dialogue's
  ``initial_config`` between dialogues; the 4 distractor families (memory_kv, memory_vector,
  memory_rec_sum, web_search) are **catalog-only**: searchable and publishable, never called (no gold
  call uses them);
* ``toolweave serve --transport http`` as a subprocess, on its own registry, with a manifest generated
  here naming those servers and catalogs;
* one MCP SDK ``Client`` session per dialogue (handshake era, so each dialogue has its own
  ``Mcp-Session-Id``: 2026-era HTTP clients without ``io.toolweave/session`` would share one), which
  re-lists on every ``list_changed`` as Claude Code does (``tests/e2e/watch.py``'s ``Relister``). Each
  turn, as a model would: ``find_tools(turn text)``, then the turn's gold calls in order, arguments
  parsed from the gold call strings; a tool in the client's list is called directly, any other through
  ``call_tool``.

Dialogues are split by id: even ids are the **learning** half, odd ids the **measured** half.
Phases: ``cold`` plays the measured half on a registry that only ingested the tools. ``warm`` first
plays the learning half through its own gateway (defaults: grtf, every edge), stops it (what it learnt
must survive a restart), then plays the measured half on a copy of that registry. ``edges`` does the
same with a learning gateway that records no usage examples (``usage_weight: 0``): what the learned
graph does without Tool2Vec's share (``edges`` needs ``cold``). ``adapted`` is ``warm`` plus the fleet's
own request map: ``toolweave adapt`` run on a copy of the learning gateway's registry once it stopped
(the refit of the map from the learning half's recorded calls, offline, as an operator or the schedule
would), then the measured half played on it (``adapted`` needs ``warm``). Graphs: ``none`` =
``retrieval.edge_kinds: []`` (no edge walked, none used for after-call next steps); ``inferred`` = the
defaults, every edge the registry holds: inferred ones, and learned ones once the gateway learns them.
The measuring phase knows nothing of how learning works: learned edges are found by reading the
registry (``toolweave graph export``: any edge origin other than declared / manifest / inferred).
``--frozen``: the measured half teaches nothing while it is played (its usage examples and sightings are
written only when its gateway stops), so ``cold`` is cold throughout and a figure does not depend on when the
periodic flush came on a busy machine (unfrozen, two runs of code that ranks find_tools alike gave
cold/inferred/grtf mAP@10 0.735 and 0.758). Today's gateway already learns one thing from traffic: each
successful call adds the turn's text as a usage example of its tool (Tool2Vec), so ``warm`` differs from
``cold`` even with no graph. Without ``--frozen`` the measured half also teaches the gateway while it is
played, in every phase, as it would in service.

Figures on the measured half, per phase × graph × method:
* turn retrieval: mAP@10, Recall@5, Complete@10 of find_tools' ranked list against the turn's gold
  tools (``toolweave.retrieval.metrics.summarize``); the 3 turns with no gold call are played (a model
  would search) but not scored, as in ``queries.jsonl``. ``probe``: the same turn text asked in a fresh
  session of the same gateway (no conversation context), just before the turn: what the gateway ranks
  without context, comparable with the offline figures;
* published: share of gold calls whose tool was in the client's list when it was called (after the
  turn's find_tools, the calls before it and any list_changed), and how many of the same method's
  ``cold/none`` misses (and of the same phase's ``none`` misses) it recovers; ``list_mismatch`` counts
  calls where the client's list differed from a fresh ``tools/list`` at that moment (a late notice);
* churn: how each dialogue's client list moved (re-lists that changed it, tools removed, tools that came
  back after being removed);
* faithful: gold calls that succeeded through the gateway with a result identical to direct execution;
* learned edges (after the learning phase) against the value-flow pairs (``bench/bfcl_flow.py``).
``--offline`` computes the turn-retrieval figures through ``toolweave.retrieval`` over a registry built
from ``tools.jsonl`` (``toolweave bench``'s runner) instead, and without it they are printed beside the
gateway's (``--no-offline`` to skip). Output: a table on stderr, ``--json`` for the whole report on stdout.

Beside this script (which plans the phases and runs them): the dialogues and the records of a replay in
``bench/bfcl_dialogues.py``, the gateway subprocess and the client that plays through it in
``bench/bfcl_gateway.py``, the backends in ``bench/bfcl_servers.py``, value flow in ``bench/bfcl_flow.py``,
figures and the table in ``bench/bfcl_report.py``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.e2e.watch: the re-listing client

import bfcl_report
from bfcl_dialogues import Dialogue, Names, Replay, load_dialogues, number_of
from bfcl_flow import (
    FlowTable,
    LearnedEdge,
    adjacent_pairs,
    export_graph,
    learned_edges,
    origins,
    score_learned,
)
from bfcl_gateway import Gateway, adapt, play, readiness_tools, write_manifest
from bfcl_servers import (
    DATASET,
    BackendFleet,
    dataset_present,
    serve_backends,
    write_distractor_catalogs,
)
from gateway_bench import machine

PHASES = ("cold", "warm", "edges", "adapted")
GRAPHS = ("none", "inferred")
METHODS = ("hybrid", "grtf")


# -- the run -------------------------------------------------------------------------------------------
@dataclass
class Plan:
    phases: list[str]
    graphs: list[str]
    methods: list[str]
    probe: bool
    min_confidence: float
    details: bool = False
    frozen: bool = False
    """The measured half teaches the gateway nothing while it is played (no usage examples, no learned
    edges written before it stops): figures that do not depend on when the periodic flush came."""
    max_tools: int | None = None
    """``publish.max_tools`` of the measured gateways (None: the default)."""
    measure: list[str] | None = None
    """The phases whose measured half is played (None: every phase)."""
    reuse: Path | None = None
    """A ``--keep`` folder of an earlier run: its phase registries (after ingest, learning, adapt) are
    the templates, and nothing is played before the measured half."""


async def run_gateway(
    plan: Plan, learning: list[Dialogue], measured: list[Dialogue], tmp: Path
) -> dict[str, Any]:
    fleet = BackendFleet()
    names = Names()
    catalogs = write_distractor_catalogs(tmp / "catalogs")
    probes = readiness_tools(names)
    out: dict[str, Any] = {"variants": {}}
    replays: dict[str, Replay] = {}
    learned: list[LearnedEdge] | None = None
    async with serve_backends(fleet) as urls:

        def gateway(
            registry: Path, method: str, graph: str, label: str, env: Mapping[str, str] | None = None
        ) -> Gateway:
            manifest = write_manifest(tmp / f"{label}.yaml", urls, catalogs, method, graph)
            return Gateway(manifest, registry, tmp / f"{label}.log", probes, env or {})

        templates: dict[str, Path] = {}
        if plan.reuse is not None:
            templates = {p: plan.reuse / p for p in PHASES if (plan.reuse / p).is_dir()}
            print(f"== reusing {', '.join(templates)} of {plan.reuse}", file=sys.stderr, flush=True)
        if plan.reuse is None and {"cold", "edges"} & set(plan.phases):  # edges starts from the cold registry
            templates["cold"] = tmp / "cold"
            print("== cold registry: the tools ingested", file=sys.stderr, flush=True)
            async with gateway(templates["cold"], "grtf", "inferred", "ingest"):
                pass
        if plan.reuse is None and "warm" in plan.phases:
            templates["warm"] = tmp / "warm"
            if "cold" in templates:
                shutil.copytree(templates["cold"], templates["warm"])
            print(f"== learning: {len(learning)} dialogues", file=sys.stderr, flush=True)
            async with gateway(templates["warm"], "grtf", "inferred", "learning") as gw:
                learnt = await play(gw.url, learning, fleet, names, probe=False, label="learning")
            graph = await anyio.to_thread.run_sync(export_graph, templates["warm"])
            learnt.graph_origins = origins(graph)
            out["learning"] = {**bfcl_report.faithful(learnt), "graph_origins": learnt.graph_origins}
            learned = learned_edges(graph, names.bare)
            out["learned_edges"] = [asdict(e) for e in learned]
            replays["learning"] = learnt
        if plan.reuse is None and "adapted" in plan.phases:
            templates["adapted"] = tmp / "adapted"
            shutil.copytree(templates["warm"], templates["adapted"])
            print("== adapt: the fleet map refit from the learning half's calls", file=sys.stderr, flush=True)
            out["adapt"] = await anyio.to_thread.run_sync(adapt, templates["adapted"])
            print(f"   {out['adapt']}", file=sys.stderr, flush=True)
        if plan.reuse is None and "edges" in plan.phases:
            # the learning half once more, on a gateway that records no usage examples (usage_weight 0:
            # the catalogs declare none, so the tool vectors are the same): the learned graph alone
            templates["edges"] = tmp / "edges"
            shutil.copytree(templates["cold"], templates["edges"])
            print(f"== learning edges only: {len(learning)} dialogues", file=sys.stderr, flush=True)
            no_usage = {"TOOLWEAVE_USAGE_WEIGHT": "0"}
            async with gateway(templates["edges"], "grtf", "inferred", "learning-edges", no_usage) as gw:
                await play(gw.url, learning, fleet, names, probe=False, label="learning-edges")
        for phase in plan.measure or plan.phases:
            for graph_choice in plan.graphs:
                for method in plan.methods:
                    label = f"{phase}-{graph_choice}-{method}"
                    registry = tmp / label
                    shutil.copytree(templates[phase], registry)
                    print(f"== {label}: {len(measured)} dialogues", file=sys.stderr, flush=True)
                    env = {"TOOLWEAVE_USAGE_FLUSH_S": "1000000"} if plan.frozen else {}
                    if plan.max_tools is not None:
                        env["TOOLWEAVE_PUBLISH__MAX_TOOLS"] = str(plan.max_tools)
                    async with gateway(registry, method, graph_choice, label, env) as gw:
                        replay = await play(gw.url, measured, fleet, names, probe=plan.probe, label=label)
                    if learned:  # what the measured half taught it too (only worth a look once it learns)
                        exported = await anyio.to_thread.run_sync(export_graph, registry)
                        replay.graph_origins = origins(exported)
                    replays[label] = replay
    out["variants"] = bfcl_report.variant_figures(replays)
    if plan.details:
        out["details"] = {label: bfcl_report.details(r) for label, r in replays.items()}
    measured_flow = next((r for k, r in replays.items() if k != "learning"), None)
    if measured_flow is not None:
        table = FlowTable.of(measured_flow.call_records())
        learn_table = FlowTable.of(replays["learning"].call_records()) if "learning" in replays else None
        out["flow"] = bfcl_report.flow_figures(table, learn_table)
        if learn_table is not None and learned is not None:
            adjacent = adjacent_pairs((c.dialogue, c.turn, c.index, c.tool) for c in measured_flow.calls)
            out["learned"] = score_learned(
                learned,
                table,
                learn_table,
                min_confidence=plan.min_confidence,
                measured_adjacent=adjacent,
            )
    return out


def run_offline(methods: Sequence[str], graphs: Sequence[str], numbers: set[int]) -> list[dict[str, Any]]:
    """The turn-retrieval figures through ``toolweave.retrieval`` over a registry built from
    ``tools.jsonl`` (``toolweave bench``'s runner), on the queries of the dialogues ``numbers``."""
    from toolweave.benchmark.datasets import load_dataset
    from toolweave.benchmark.runner import run_benchmark
    from toolweave.settings import RetrievalSettings

    dataset = load_dataset(str(DATASET))
    dataset.query_sets = {
        name: [q for q in queries if number_of(q.id) in numbers]
        for name, queries in dataset.query_sets.items()
    }
    rows = []
    for graph in graphs:
        for method in methods:
            # One run (and registry) per method: fleet fusion keeps a running record per registry, and a
            # second method run on the same one would start from the first one's record.
            params = RetrievalSettings(method=method)
            [result] = run_benchmark(
                dataset, params, graph="none" if graph == "none" else "inferred", ks=(5, 10)
            )
            rows.append(
                {
                    "graph": graph,
                    "method": method,
                    "queries": result.queries,
                    **{k: result.metrics[k] for k in ("map@10", "recall@5", "complete@10", "returned")},
                }
            )
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--phases", default="cold,warm", help="cold, warm, edges, adapted (comma list)")
    parser.add_argument("--graphs", default="none,inferred", help="none, inferred (comma list)")
    parser.add_argument("--methods", default="hybrid,grtf", help="hybrid, grtf (comma list)")
    parser.add_argument("--dialogues", help="N (ids 0..N-1) or a comma list of numbers or ids; default all")
    parser.add_argument(
        "--measure", help="play the measured half on these phases only (default: every phase)"
    )
    parser.add_argument("--reuse", type=Path, help="a --keep folder: its registries, nothing learnt again")
    parser.add_argument("--no-probe", action="store_true", help="skip the context-free probe of each turn")
    parser.add_argument("--offline", action="store_true", help="only the offline turn-retrieval figures")
    parser.add_argument("--no-offline", action="store_true", help="skip the offline figures")
    parser.add_argument(
        "--half", choices=["measured", "learning", "all"], default="measured", help="--offline only"
    )
    parser.add_argument(
        "--min-confidence", type=float, default=0.5, help="learned edges scored from this one"
    )
    parser.add_argument("--json", action="store_true", help="the whole report as JSON on stdout")
    parser.add_argument(
        "--details", action="store_true", help="with --json: every turn's list and every call"
    )
    parser.add_argument("--keep", type=Path, help="work in this new folder and keep it (registries, logs)")
    parser.add_argument(
        "--frozen", action="store_true", help="the measured half teaches the gateway nothing while played"
    )
    parser.add_argument("--max-tools", type=int, help="publish.max_tools of the measured gateways")
    args = parser.parse_args()
    if not dataset_present():
        print(f"skipped: {DATASET} is absent (../shared beside the repository)", file=sys.stderr)
        return 0
    try:
        import mpmath  # noqa: F401
    except ImportError:
        print("skipped: mpmath is missing (MathAPI needs it): pip install -e '.[bench]'", file=sys.stderr)
        return 0
    plan = Plan(
        _phases(args.phases),
        _choices(args.graphs, GRAPHS),
        _choices(args.methods, METHODS),
        not args.no_probe,
        args.min_confidence,
        args.details,
        args.frozen,
        args.max_tools,
        _choices(args.measure, PHASES) if args.measure else None,
        args.reuse,
    )
    if plan.measure and not set(plan.measure) <= set(plan.phases):
        raise SystemExit("--measure: only phases that --phases runs")
    from bfcl_servers import backend_classes

    dialogues = load_dialogues(args.dialogues, backend_classes())
    learning = [d for d in dialogues if d.number % 2 == 0]
    measured = [d for d in dialogues if d.number % 2 == 1]
    report: dict[str, Any] = {
        "machine": machine(),
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "dialogues": {"learning": len(learning), "measured": len(measured)},
        "calls": {
            "learning": sum(len(t.calls) for d in learning for t in d.turns),
            "measured": sum(len(t.calls) for d in measured for t in d.turns),
        },
    }
    if args.offline:
        half = {"measured": measured, "learning": learning, "all": dialogues}[args.half]
        report["half"] = args.half
        report["offline"] = run_offline(plan.methods, plan.graphs, {d.number for d in half})
    else:
        if args.keep:
            args.keep.mkdir(parents=True)  # a new folder: registries of an earlier run must not be reused
            report.update(anyio.run(run_gateway, plan, learning, measured, args.keep))
        else:
            with tempfile.TemporaryDirectory(prefix="toolweave-bfcl-replay-") as tmp:
                report.update(anyio.run(run_gateway, plan, learning, measured, Path(tmp)))
        if not args.no_offline:
            report["offline"] = run_offline(plan.methods, plan.graphs, {d.number for d in measured})
    bfcl_report.print_report(report, sys.stderr)
    if args.json:
        print(json.dumps(report, indent=2, default=str))
    return 0


def _phases(raw: str) -> list[str]:
    phases = _choices(raw, PHASES)
    for phase, needs in (("adapted", "warm"),):
        if phase in phases and needs not in phases:
            raise SystemExit(f"phase {phase} needs phase {needs} (--phases {needs},{phase})")
    return phases


def _choices(raw: str, allowed: Sequence[str]) -> list[str]:
    chosen = [c.strip() for c in raw.split(",") if c.strip()]
    bad = [c for c in chosen if c not in allowed]
    if bad or not chosen:
        raise SystemExit(f"choose among {', '.join(allowed)} (got {raw!r})")
    return chosen


if __name__ == "__main__":
    sys.exit(main())
