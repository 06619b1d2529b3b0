"""The scale bench's fleet: catalog folders of N tools made from the datasets' tools (for bench/scale.py).

Which tools a fleet of a given size holds, written once under bench/out/scale/fleet, and where each
size's registry lives. Apart from the vectors and the steps: every step (build, ingest, measure) reads
the same fleet, and the fleet is plain files, no model and no registry.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from gateway_bench import DOMAINS, TOOLLINKOS, synthetic_tools

HERE = Path(__file__).resolve().parent

DATASETS = HERE.parent.parent / "shared" / "datasets"
NORMALIZED = ("api_bank", "metatool", "seal_tools", "openapi_links")
OUT = HERE / "out" / "scale"
SYNTHETIC_MAX = 10_000
DOMAINS_PER_SOURCE = 4


def _rows(dataset: str) -> list[dict[str, Any]]:
    with (DATASETS / dataset / "tools.jsonl").open() as f:
        return [json.loads(line) for line in f if line.strip()]


def _variant(row: dict[str, Any], domain: str) -> dict[str, Any]:
    """``row`` as the ``domain`` team's copy of the tool: its own name, a description naming the domain,
    declared dependencies renamed to the same copy's tools."""
    out = dict(row, name=f"{domain}_{row['name']}", description=f"{domain.title()}: {row['description']}")
    out["depends_on"] = [f"{domain}_{d}" for d in row.get("depends_on") or []]
    out.pop("depends_on_detail", None)
    return out


def fleet_folders(size: int) -> Iterator[tuple[str, Path]]:
    """``(source, catalog folder)`` of the ``size``-tool fleet, written under bench/out/scale once."""
    yield "toollinkos", TOOLLINKOS
    count = len(json.loads((TOOLLINKOS / "core_tools.json").read_text()))
    count += len(json.loads((TOOLLINKOS / "regular_tools.json").read_text()))
    for name in NORMALIZED:
        yield name, DATASETS / name
        count += len(_rows(name))
    synth = min(SYNTHETIC_MAX, size - count)
    if synth > 0:
        yield "synth", _write(f"synth-{synth}", synthetic_tools(synth))
        count += synth
    # Few, large variant sources: every ingest re-reads the whole registry (snapshot, full-text index,
    # inference), so a fleet cut into many small sources would time that, not the per-tool work.
    for group in range(0, len(DOMAINS), DOMAINS_PER_SOURCE):
        if count >= size:
            return
        domains = DOMAINS[group : group + DOMAINS_PER_SOURCE]
        rows = [_variant(r, d) for d in domains for name in NORMALIZED for r in _rows(name)][: size - count]
        names = {r["name"] for r in rows}
        for r in rows:  # a cut-off copy keeps only edges inside itself
            r["depends_on"] = [d for d in r["depends_on"] if d in names]
        yield f"variants-{domains[0]}", _write(f"variants-{domains[0]}-{len(rows)}", rows)
        count += len(rows)


def _write(name: str, rows: list[dict[str, Any]]) -> Path:
    folder = OUT / "fleet" / name
    if not (folder / "tools.jsonl").exists():
        folder.mkdir(parents=True, exist_ok=True)
        tmp = folder / "tools.jsonl.tmp"
        with tmp.open("w") as f:
            for row in rows:
                f.write(json.dumps(row) + "\n")
        tmp.rename(folder / "tools.jsonl")
    return folder


def catalogs(size: int) -> list[Any]:
    from toolweave.registry import load_catalog

    return [
        load_catalog([folder], source, require_description=False) for source, folder in fleet_folders(size)
    ]


def registry_dir(size: int, mode: str) -> Path:
    return OUT / f"registry-{size}-{mode}"


def new_sources(size: int, count: int, how_many: int = 2) -> list[tuple[str, Path]]:
    """Sources the ``size``-tool fleet lacks: the first ``count`` variants of each of the next groups of
    domains (one domain's copy of the datasets' tools while ``count`` is at most ~4.3k)."""
    used = {source for source, _ in fleet_folders(size) if source.startswith("variants-")}
    out: list[tuple[str, Path]] = []
    for group in range(0, len(DOMAINS), DOMAINS_PER_SOURCE):
        domains = DOMAINS[group : group + DOMAINS_PER_SOURCE]
        source = f"variants-{domains[0]}"
        if source in used or len(out) == how_many:
            continue
        rows = [_variant(r, d) for d in domains for name in NORMALIZED for r in _rows(name)][:count]
        names = {r["name"] for r in rows}
        for r in rows:
            r["depends_on"] = [d for d in r["depends_on"] if d in names]
        out.append((source, _write(f"new-{domains[0]}-{len(rows)}", rows)))
    if len(out) < how_many:
        raise ValueError(f"not enough domain groups left for new sources beside the {size}-tool fleet")
    return out
