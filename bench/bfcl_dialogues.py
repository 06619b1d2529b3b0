"""The BFCL dialogues and what one replay of them records (for bench/bfcl_replay.py).

Plain data, no gateway and no network: the dialogues with their gold calls and the results those calls
give executed directly (in process), each turn's and each call's record, and the published-name map.
Apart from the gateway because ``--offline`` needs the dialogues and nothing that starts a gateway.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from bfcl_flow import CallRecord
from bfcl_servers import (
    DATASET,
    GoldCall,
    catalogue,
    dialogue_calls,
    direct_results,
    read_jsonl,
    source_of_class,
)


# -- the dialogues -------------------------------------------------------------------------------------
@dataclass
class Turn:
    index: int
    text: str
    gold: tuple[str, ...] | None
    """The turn's gold tools from queries.jsonl; None for the 3 turns without a gold call."""
    calls: list[GoldCall]
    expected: list[dict[str, Any]]
    """Each call's result executed directly (what a faithful replay returns)."""


@dataclass
class Dialogue:
    id: str
    number: int
    raw: dict[str, Any]
    turns: list[Turn]


def number_of(dialogue_id: str) -> int:
    return int(dialogue_id.split("-", 1)[0].rsplit("_", 1)[1])


def load_dialogues(selection: str | None, classes: dict[str, type]) -> list[Dialogue]:
    """The dialogues chosen by ``--dialogues``: ``N`` = ids 0..N-1, or a comma list of numbers or ids."""
    rows = read_jsonl(DATASET / "dialogues.jsonl")
    if selection:
        wanted = (
            set(range(int(selection)))
            if selection.isdigit()
            else {int(s) if s.strip().isdigit() else number_of(s.strip()) for s in selection.split(",")}
        )
        rows = [r for r in rows if number_of(r["id"]) in wanted]
    queries = {(q["dialogue_id"], q["turn"]): q for q in read_jsonl(DATASET / "queries.jsonl")}
    out = []
    for raw in rows:
        calls = dialogue_calls(raw, classes)
        expected = direct_results(raw, calls, classes)
        turns = []
        for t, messages in enumerate(raw["turns"]):
            query = queries.get((raw["id"], t))
            gold = tuple(query["gold_tools"]) if query else None
            text = query["query"] if query else " ".join(messages)
            turns.append(Turn(t, text, gold, calls[t], expected[t]))
        out.append(Dialogue(raw["id"], number_of(raw["id"]), raw, turns))
    return out


# -- what one replay records ---------------------------------------------------------------------------
@dataclass
class TurnRecord:
    dialogue: str
    turn: int
    gold: tuple[str, ...] | None
    ranked: list[str]
    published: list[str]
    """The ranked tools the answer marks published."""
    probe: list[str] | None = None


@dataclass
class CallOutcome:
    dialogue: str
    turn: int
    index: int
    tool: str
    arguments: dict[str, Any]
    published: bool
    """The tool was in the client's list when it was called."""
    listed: bool
    """The tool was in a fresh tools/list at that moment."""
    via: str
    ok: bool
    identical: bool
    result: dict[str, Any] | None
    error: str | None = None
    list_size: int = 0
    """Registry tools in the client's list when it was called (the meta-tools not counted)."""
    list_needed: int = 0
    """Of those, tools some gold call of the dialogue uses (the published set's precision's numerator)."""

    @property
    def key(self) -> tuple[str, int, int]:
        return (self.dialogue, self.turn, self.index)


@dataclass
class Replay:
    turns: list[TurnRecord] = field(default_factory=list)
    calls: list[CallOutcome] = field(default_factory=list)
    wall_s: float = 0.0
    graph_origins: dict[str, int] = field(default_factory=dict)
    lists: dict[str, list[list[str]]] = field(default_factory=dict)
    """Each dialogue's tool lists as its client held them: the first one, then each re-list."""

    def call_records(self) -> list[list[CallRecord]]:
        """Each dialogue's calls as the gateway answered them (a failed call has no result)."""
        by_dialogue: dict[str, list[CallRecord]] = {}
        for c in self.calls:
            by_dialogue.setdefault(c.dialogue, []).append(CallRecord(c.tool, c.arguments, c.result))
        return list(by_dialogue.values())


class Names:
    """Published names ↔ bare BFCL names. Ids are ``<source>__<name>``; the gateway publishes an id over
    ``publish.name_budget`` (48: some distractors, ``vehicle__get_outside_temperature_from_weather_com``)
    under a shortened name, reproduced here with its own ``NameMap``."""

    def __init__(self) -> None:
        from toolweave.records import make_tool_id
        from toolweave.server.turns.names import NameMap
        from toolweave.settings import PublishSettings

        ids = {make_tool_id(source_of_class(t["class"]), t["name"]): t["name"] for t in catalogue()}
        published = NameMap(PublishSettings().name_budget, lambda: ids)
        self.bare = {published.name(tool_id): name for tool_id, name in ids.items()}
        self.published = {name: published_name for published_name, name in self.bare.items()}

    def to_bare(self, names: Iterable[str]) -> list[str]:
        return [self.bare.get(n, n) for n in names]
