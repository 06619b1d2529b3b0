"""Benchmark folders: the ToolLinkOS layout and the normalized layout (see ``datasets/FORMAT.md``).

A name is looked up under ``../shared/datasets/`` (beside the repository, or beside the current
directory); an existing path is used as is.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from toolweave.errors import CatalogError
from toolweave.records import DependencyEdge, ToolRecord
from toolweave.registry.catalog import load_catalog

__all__ = ["BenchDataset", "BenchQuery", "dataset_roots", "edges_from", "load_dataset", "resolve_dataset"]


@dataclass(frozen=True)
class BenchQuery:
    id: str
    text: str
    gold: tuple[str, ...]
    """Gold tool *names* (not ids)."""
    split: str | None = None
    main: str | None = None
    """The tool the request is for, where the dataset says (ToolLinkOS); its dependencies come along."""


@dataclass
class BenchDataset:
    name: str
    path: Path
    tools: list[ToolRecord]
    edges: list[DependencyEdge]
    query_sets: dict[str, list[BenchQuery]] = field(default_factory=dict)
    """Query file stem → queries (``queries``, ``queries_single``, ``queries_multi``, ``instances``)."""


def dataset_roots() -> list[Path]:
    repo = Path(__file__).resolve().parents[2]
    return [Path.cwd() / ".." / "shared" / "datasets", repo / ".." / "shared" / "datasets"]


def resolve_dataset(name_or_dir: str) -> Path:
    """A folder path, or the name of a folder under ``../shared/datasets``."""
    candidate = Path(name_or_dir).expanduser()
    if candidate.is_dir():
        return candidate
    for root in dataset_roots():
        if (root / name_or_dir).is_dir():
            return (root / name_or_dir).resolve()
    roots = ", ".join(str(r.resolve()) for r in dataset_roots())
    raise CatalogError(
        f"no benchmark folder {name_or_dir!r} (looked in the current directory and in {roots})"
    )


def load_dataset(name_or_dir: str, *, query_file: Path | None = None) -> BenchDataset:
    path = resolve_dataset(name_or_dir)
    name = path.name
    catalog = load_catalog([path], name, require_description=False)
    if query_file is not None:
        sets = {query_file.stem: _read_queries(query_file)}
    elif (path / "instances.json").exists():
        sets = {"instances": _read_toollinkos_instances(path)}
    else:
        files = sorted(path.glob("queries*.jsonl"))
        sets = {f.stem: _read_queries(f) for f in files}
    if not sets:
        raise CatalogError(f"{path}: no queries (instances.json or queries*.jsonl)")
    return BenchDataset(name, path, catalog.tools, catalog.edges, sets)


def _read_toollinkos_instances(path: Path) -> list[BenchQuery]:
    instances = json.loads((path / "instances.json").read_text(encoding="utf-8"))
    split_of: dict[int, str] = {}
    split_file = path / "split.json"
    if split_file.exists():
        split = json.loads(split_file.read_text(encoding="utf-8"))
        for part in ("examples", "test"):
            for i in split.get(part, []):
                split_of[int(i)] = part
    return [
        BenchQuery(
            str(i),
            q["user_query"],
            tuple(q["golden_function_names"]),
            split_of.get(i),
            q["main_golden_function_name"],
        )
        for i, q in enumerate(instances)
    ]


def _read_queries(path: Path) -> list[BenchQuery]:
    out = []
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            q = json.loads(line)
            out.append(BenchQuery(str(q["id"]), q["query"], tuple(q["gold_tools"]), q.get("split")))
        except (json.JSONDecodeError, KeyError, TypeError) as exc:
            raise CatalogError(f"{path}: line {lineno}: not a query record: {exc}") from exc
    return out


def edges_from(dataset: BenchDataset, name_or_dir: str) -> list[DependencyEdge]:
    """The declared edges of another folder that holds the same tools (``nestful_graph`` beside
    ``nestful``: a gold graph kept apart from the queries it was read from), as edges of ``dataset``'s
    tools. For checking what walking a graph does; raises when the folders' tools differ."""
    path = resolve_dataset(name_or_dir)
    catalog = load_catalog([path], dataset.name, require_description=False)
    ours, theirs = {t.id for t in dataset.tools}, {t.id for t in catalog.tools}
    if ours != theirs:
        missing = sorted(theirs ^ ours)[:5]
        raise CatalogError(f"{path}: not the tools of {dataset.path} (e.g. {', '.join(missing)})")
    return catalog.edges
