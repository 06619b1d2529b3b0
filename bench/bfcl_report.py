"""Figures and the stderr table of bench/bfcl_replay.py (replays in, numbers and text out)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict
from itertools import pairwise
from typing import Any, TextIO

from bfcl_flow import FlowTable

from toolweave.retrieval.metrics import summarize

# The acceptance bars set for the learned graph (measured half, after learning on the other half): grtf with
# learned + inferred edges, learned edges against the value flow, next gold tool already published.
BARS = {"complete@10": 0.90, "map@10": 0.74, "precision": 0.8, "recall": 0.6, "published": 0.97}


def retrieval(turns: Sequence[Any], attr: str = "ranked") -> dict[str, float] | None:
    """mAP@10, Recall@5, Complete@10 of the scored turns' lists (``ranked``: find_tools in the session;
    ``probe``: the same text in a fresh session); ``returned`` = tools the answers marked published."""
    scored = [t for t in turns if t.gold and getattr(t, attr) is not None]
    if not scored:
        return None
    runs = [(getattr(t, attr), t.gold) for t in scored]
    published = [t.published for t in scored] if attr == "ranked" else None
    m = summarize(runs, (5, 10), published)
    keys = ("map@10", "recall@5", "complete@10") + (("returned",) if published else ())
    return {"queries": len(runs), **{k: m[k] for k in keys}}


def faithful(replay: Any) -> dict[str, Any]:
    calls = replay.calls
    failures = [
        {"dialogue": c.dialogue, "turn": c.turn, "call": c.index, "tool": c.tool, "error": c.error}
        for c in calls
        if not c.ok
    ]
    differing = [
        {"dialogue": c.dialogue, "turn": c.turn, "call": c.index, "tool": c.tool}
        for c in calls
        if c.ok and not c.identical
    ]
    return {
        "calls": len(calls),
        "succeeded": sum(c.ok for c in calls),
        "identical": sum(c.identical for c in calls),
        "direct": sum(c.via == "direct" for c in calls),
        "via_call_tool": sum(c.via == "call_tool" for c in calls),
        "failures": failures[:20],
        "differing": differing[:20],
    }


def published(calls: Sequence[Any]) -> dict[str, Any]:
    """Share of gold calls whose tool the client already listed, and the published set at those moments:
    its mean size (registry tools, meta-tools not counted) and precision (the share of it that some gold
    call of the dialogue uses), averaged over calls."""
    hits = sum(c.published for c in calls)
    sizes = [c.list_size for c in calls]
    precisions = [c.list_needed / c.list_size for c in calls if c.list_size]
    return {
        "calls": len(calls),
        "already_published": hits,
        "share": hits / len(calls) if calls else None,
        "list_mismatch": sum(c.published != c.listed for c in calls),
        "set_size_mean": sum(sizes) / len(sizes) if sizes else None,
        "set_size_max": max(sizes, default=None),
        "set_precision": sum(precisions) / len(precisions) if precisions else None,
    }


def churn(lists: Mapping[str, Sequence[Sequence[str]]], meta: frozenset[str] = frozenset()) -> dict[str, Any]:
    """How the client's list moved in each dialogue: changes (re-lists whose list differs from the one
    before), tools removed, and tools that came back after being removed (the cache-unfriendly churn)."""
    changes = removed = returned = 0
    for seen in lists.values():
        gone: set[str] = set()
        for before, after in pairwise(seen):
            b, a = set(before) - meta, set(after) - meta
            changes += a != b
            removed += len(b - a)
            returned += len((a - b) & gone)
            gone |= b - a
    dialogues = len(lists) or 1
    return {
        "dialogues": len(lists),
        "changes_per_dialogue": changes / dialogues,
        "removed_per_dialogue": removed / dialogues,
        "returned_per_dialogue": returned / dialogues,
    }


def first_find(turns: Sequence[Any]) -> dict[str, float] | None:
    """mAP@10 / Complete@10 of each dialogue's first scored find_tools (a fleet met cold, one request)."""
    first: dict[str, Any] = {}
    for t in turns:
        if t.gold and t.dialogue not in first:
            first[t.dialogue] = t
    if not first:
        return None
    m = summarize([(t.ranked, t.gold) for t in first.values()], (10,))
    return {"queries": len(first), "map@10": m["map@10"], "complete@10": m["complete@10"]}


def recovered(calls: Sequence[Any], baseline: Sequence[Any] | None) -> dict[str, int] | None:
    """Of the calls whose tool ``baseline`` had not published, how many this replay had."""
    if baseline is None:
        return None
    misses = {c.key for c in baseline if not c.published}
    return {"baseline_misses": len(misses), "recovered": sum(c.published for c in calls if c.key in misses)}


def variant_figures(replays: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Figures of each measured variant (``phase-graph-method``), misses recovered against the same
    method's ``cold-none`` and same phase's ``none`` variants (not against itself)."""
    out = {}
    for label, replay in replays.items():
        if label == "learning":
            continue
        phase, graph, method = label.split("-")
        cold_none = replays.get(f"cold-none-{method}") if label != f"cold-none-{method}" else None
        phase_none = replays.get(f"{phase}-none-{method}") if graph != "none" else None
        out[label] = {
            "phase": phase,
            "graph": graph,
            "method": method,
            "retrieval": retrieval(replay.turns),
            "probe": retrieval(replay.turns, "probe"),
            "first_find": first_find(replay.turns),
            "published": published(replay.calls),
            "churn": churn(getattr(replay, "lists", {}), frozenset({"find_tools", "call_tool"})),
            "recovered_vs_cold_none": recovered(replay.calls, cold_none.calls if cold_none else None),
            "recovered_vs_phase_none": recovered(replay.calls, phase_none.calls if phase_none else None),
            "faithful": faithful(replay),
            "graph_origins": replay.graph_origins,
            "wall_s_loaded_machine": round(replay.wall_s, 1),
        }
    return out


def details(replay: Any) -> dict[str, Any]:
    """Every turn's ranked list and every call of a replay, as the gateway answered them."""
    return {
        "turns": [asdict(t) for t in replay.turns],
        "calls": [{k: v for k, v in asdict(c).items() if k != "arguments"} for c in replay.calls],
    }


def flow_figures(measured: FlowTable, learning: FlowTable | None) -> dict[str, Any]:
    rows = measured.rows()
    for row in rows:
        pair = (row["consumer"], row["parameter"], row["producer"])
        row["learning_dialogues"] = learning.dialogues[pair] if learning else None
    return {
        "calls_with_flow": measured.calls_with_flow,
        "pairs": len(rows),
        "occurrences": sum(measured.count.values()),
        "learning_calls_with_flow": learning.calls_with_flow if learning else None,
        "learning_pairs": len(learning.count) if learning else None,
        "rows": rows,
    }


def acceptance(report: Mapping[str, Any]) -> list[tuple[str, float | None, str, bool | None]]:
    """(what, value, bar, met) for each acceptance line the report can speak to."""
    lines: list[tuple[str, float | None, str, bool | None]] = []
    warm = report.get("variants", {}).get("warm-inferred-grtf")
    if warm:
        r = warm["retrieval"] or {}
        for key in ("complete@10", "map@10"):
            value = r.get(key)
            lines.append((f"grtf warm/inferred {key}", value, f">= {BARS[key]}", _at_least(value, BARS[key])))
        share = warm["published"]["share"]
        lines.append(
            ("next gold tool already published", share, ">= 0.97", _at_least(share, BARS["published"]))
        )
        rec = warm["recovered_vs_cold_none"]
        if rec:
            half = rec["baseline_misses"] / 2
            lines.append(
                (
                    f"cold/none misses recovered ({rec['recovered']} of {rec['baseline_misses']})",
                    rec["recovered"] / rec["baseline_misses"] if rec["baseline_misses"] else None,
                    ">= 0.5",
                    rec["recovered"] >= half,
                )
            )
    learned = report.get("learned")
    if learned:
        for key in ("precision", "recall"):
            value = learned.get(key)
            lines.append((f"learned edges {key}", value, f">= {BARS[key]}", _at_least(value, BARS[key])))
    return lines


def _at_least(value: float | None, bar: float) -> bool | None:
    return None if value is None else value >= bar


def _f(value: Any) -> str:
    return "   -  " if value is None else f"{value:6.3f}"


def print_report(report: Mapping[str, Any], out: TextIO) -> None:
    d, c = report["dialogues"], report["calls"]
    print(
        f"\nBFCL multi-turn replay ({report['machine']['date']}, commit {report['machine']['commit']}): "
        f"learning half {d['learning']} dialogues / {c['learning']} gold calls, "
        f"measured half {d['measured']} / {c['measured']}",
        file=out,
    )
    if "learning" in report:
        lf = report["learning"]
        print(
            f"learning: {lf['succeeded']}/{lf['calls']} gold calls succeeded, {lf['identical']} identical to "
            f"direct execution; edges after learning by origin: {lf['graph_origins']}",
            file=out,
        )
    head = (
        f"{report.get('half', 'measured') + ' half':22} {'queries':>7} {'mAP@10':>6} {'R@5':>6} "
        f"{'C@10':>6} | "
        f"{'probe mAP':>9} {'C@10':>6} | {'1st C@10':>8} | {'published':>9} {'set':>5} {'prec':>6} "
        f"{'rec/cold':>9} {'rec/phase':>9} {'mismatch':>8} | {'faithful':>9}"
    )
    print(head, file=out)
    for label, v in report.get("variants", {}).items():
        r, p, pub = v["retrieval"] or {}, v["probe"] or {}, v["published"]
        f, first = v["faithful"], v.get("first_find") or {}
        size = pub.get("set_size_mean")
        print(
            f"{label.replace('-', '/'):22} {_metrics(r)} | {_f(p.get('map@10')):>9} "
            f"{_f(p.get('complete@10'))} | {_f(first.get('complete@10')):>8} | "
            f"{_f(pub['share']):>9} {'  -  ' if size is None else f'{size:5.1f}'} "
            f"{_f(pub.get('set_precision'))} {_rec(v['recovered_vs_cold_none']):>9} "
            f"{_rec(v['recovered_vs_phase_none']):>9} {pub['list_mismatch']:>8} | "
            f"{f['identical']:>4}/{f['calls']:<4}",
            file=out,
        )
    for label, v in report.get("variants", {}).items():
        c = v.get("churn") or {}
        if c.get("dialogues"):
            print(
                f"{label.replace('-', '/'):22} list per dialogue: {c['changes_per_dialogue']:.1f} changes, "
                f"{c['removed_per_dialogue']:.1f} tools removed, {c['returned_per_dialogue']:.1f} came back",
                file=out,
            )
    for row in report.get("offline", []):
        print(f"{'offline/' + row['graph'] + '/' + row['method']:22} {_metrics(row)}", file=out)
    for label, v in report.get("variants", {}).items():
        for failure in v["faithful"]["failures"] + v["faithful"]["differing"]:
            print(f"  {label}: not faithful: {failure}", file=out)
    flow = report.get("flow")
    if flow:
        print(
            f"\nvalue flow, measured half: {flow['calls_with_flow']} calls take a value an earlier result "
            f"held; {flow['pairs']} pairs, {flow['occurrences']} occurrences (learning half: "
            f"{flow['learning_calls_with_flow']} calls, {flow['learning_pairs']} pairs)",
            file=out,
        )
        print(f"  {'count':>5} {'dialogues':>9} {'learning':>8}  consumer.parameter <- producer", file=out)
        for row in flow["rows"]:
            print(
                f"  {row['count']:>5} {row['dialogues']:>9} {row['learning_dialogues'] or 0:>8}  "
                f"{row['consumer']}.{row['parameter']} <- {row['producer']}",
                file=out,
            )
    learned = report.get("learned")
    if learned:
        o = learned["oracle"]
        print(
            f"\nlearned edges (confidence >= {learned['min_confidence']}): {learned['edges']} "
            f"({learned['learned_all_confidences']} at any confidence), precision "
            f"{_f(learned['precision'])}, recall {_f(learned['recall'])} of {learned['learnable_pairs']} "
            f"measured pairs seen in >= 2 learning dialogues. Oracle learner (those learning pairs): "
            f"{o['edges']} edges, precision "
            f"{_f(o['precision'])}, recall {_f(o['recall'])}",
            file=out,
        )
        sequence = learned.get("sequence") or []
        print(
            f"learned sequence edges (tool edges, confidence >= {learned['min_confidence']}): "
            f"{len(sequence)}, {learned.get('sequence_true')} of them seen in the measured half's gold "
            f"order: " + ", ".join(f"{e['consumer']} <- {e['producer']}" for e in sequence[:30]),
            file=out,
        )
    lines = acceptance(report)
    if lines:
        print("\nacceptance (measured half):", file=out)
        for what, value, bar, met in lines:
            verdict = "n/a" if met is None else ("met" if met else "NOT met")
            print(f"  {what:55} {_f(value)}  {bar:8} {verdict}", file=out)


def _metrics(r: Mapping[str, Any]) -> str:
    return (
        f"{r.get('queries', 0):>7} {_f(r.get('map@10'))} {_f(r.get('recall@5'))} {_f(r.get('complete@10'))}"
    )


def _rec(rec: Mapping[str, int] | None) -> str:
    return "-" if rec is None else f"{rec['recovered']}/{rec['baseline_misses']}"
