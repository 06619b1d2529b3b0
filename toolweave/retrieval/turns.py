"""Per-turn ranking decisions: which earlier turns a turn is ranked with, whether the topic moved, and what
comes next after a call. Pure functions over texts, vectors and tool ids; the server's turn engine
(``toolweave.server.turns.engine``) embeds, searches, publishes and notifies around them.

After a call the gateway publishes a few next steps. The request ranks them first, edge evidence second:

1. **The rest of the request.** A turn that asks for two things ("show me the last commit and remember its
   hash in memory") is ranked as a whole, where the first thing drowns the second. Once a call served one
   part (``request_parts``, ``served_part``), the other parts are ranked alone, the parts after it first
   (``part_order``), one hit per part at a time (``one_part_at_a_time``).
2. **The act each part asks for.** A part ranked alone finds its subject, not its verb: "remember its hash
   in memory" ranks the memory server's reader and deleters, and git's tools (a hash), above any memory
   write. So the subject's tools whose name does what the part asks (``asked_acts``: write for
   "remember", delete for "forget") go first, and a deleting tool the part does not ask for goes last
   (``by_request_act``). A part that names a server ("... in memory") has that server as its subject
   whatever the search ranked first (``named_source``).
3. **Edge evidence.** Tools traffic saw called right after this one, and consumers of its output through
   walkable edges, most confident first (``evidence_order``).

Which published tools leave (``leaving``): the set grows only with what the conversation still needs. A
tool a request chose (or a next step after one of its calls) and nobody called leaves once ``CHOSEN_KEPT``
later requests passed it over (``SERVER_KEPT`` while its server is in use); a called tool stays while it
was called within the last ``USED_KEPT`` requests (the task in progress); when the topic moves, every tool
the new request does not choose leaves (a finished sub-task's tools, an unrelated server's). Removals ride
on a change the request makes anyway (something added, or the topic moved): a request that adds nothing
leaves the client's cached list as it is.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from toolweave.names import name_of, name_words
from toolweave.records import DependencyEdge, EdgeKind
from toolweave.retrieval.decompose import decompose_query

__all__ = [
    "CHOSEN_KEPT",
    "FOLLOW_UP_WORDS",
    "NEXT_STEPS",
    "REST_MIN_WORDS",
    "SERVER_KEPT",
    "TOPIC_SHIFT_BELOW",
    "USED_KEPT",
    "Act",
    "Standing",
    "asked_acts",
    "asked_steps",
    "by_request_act",
    "conversation_context",
    "evidence_order",
    "leaving",
    "named_source",
    "next_steps",
    "one_part_at_a_time",
    "part_order",
    "request_parts",
    "served_part",
    "tool_act",
    "topic_shifted",
]

FOLLOW_UP_WORDS = 8
"""A turn of fewer words leans on the conversation ("and in Paris?", "what about the standard deviation?")
and is ranked with the earlier turns as context; a longer one says what it needs and is ranked alone.
Context added to a turn that stands on its own drags the ranking back to the previous topic: on BFCL
multi-turn it cost 0.026 mAP@10 on each half (``bench/bfcl_context_lab.py``), and its parts, each
ranked with the same context, lost the tools of a new topic altogether."""

TOPIC_SHIFT_BELOW = 0.08
"""A turn whose embedding is on average less similar than this to the context turns starts a new topic:
they stop being retrieval context. With the default MiniLM, unrelated requests score about -0.05-0.05
and follow-ups 0.09-0.3 ("find flights to Rome" / "what's the weather there": 0.094)."""

NEXT_STEPS = 3
"""Tools published after a call at most: a guess costs the client's prompt cache and its attention."""

CHOSEN_KEPT = 0
"""Later requests a published tool that was never called stays through without being chosen again. 0: it
leaves at the first request that does not choose it (it was a guess for a request that has passed)."""

USED_KEPT = 1
"""Later requests a called tool stays published through without being called or chosen again: a task in
progress comes back to its tools (``cd``, ``ls``) in the next request. Replaying the BFCL replay's recorded
turns, 2 kept no more gold calls published, for 0.4 more tools in the set."""

SERVER_KEPT = 0
"""Later requests an uncalled tool stays through while a tool of its server is in use (called within
``USED_KEPT``). 0: no longer than any other guess. On the BFCL replay (cold, grtf) 1 keeps 6 more gold calls
published of 559 (0.868 against 0.857) and halves the tools that leave and come back (1.6 against 3.3 per
dialogue), for 2.3 more tools in the set (12.3 against 10.0): over the 10 the set is meant to stay under."""

REST_MIN_WORDS = 2
"""Content words each part of a request needs to be ranked alone after a call served another part."""

Act = Literal["write", "delete"]
"""What a request part asks to do to its subject, when its words say so; reading is the default."""

_WRITE_ASKED = "remember memorize memorise save store keep add create write insert append put register upload"
_DELETE_ASKED = "delete remove forget erase drop clear purge discard destroy wipe unset"
_WRITE_DONE = "create add write save store insert append put set update upsert record new make post upload"
_DELETE_DONE = "delete remove erase drop clear purge destroy wipe unset del rm"

_ASKED: dict[str, Act] = {
    **dict.fromkeys(_WRITE_ASKED.split(), "write"),
    **dict.fromkeys(_DELETE_ASKED.split(), "delete"),
}
"""Request verbs → the act they ask for. Only words that are verbs in a request: "note", "log", "record" and
"post" are nouns as often ("student_record.txt", "show me the posts")."""

_DONE: dict[str, Act] = {
    **dict.fromkeys(_WRITE_DONE.split(), "write"),
    **dict.fromkeys(_DELETE_DONE.split(), "delete"),
}
"""Words of a tool's name → the act the tool does (``git_log`` reads: "log" is no act here)."""

_WORD = re.compile(r"[a-z]+")
_ENDINGS = ("ing", "ed", "es", "s", "d", "e")


def conversation_context(text: str, context: Sequence[str]) -> list[str]:
    """The earlier turns ``text`` is ranked with: all of them for a short follow-up, none for a turn of
    ``FOLLOW_UP_WORDS`` words or more (it still becomes context for the turns after it)."""
    return list(context) if len(text.split()) < FOLLOW_UP_WORDS else []


def topic_shifted(earlier: Sequence[np.ndarray], latest: np.ndarray) -> bool:
    """Whether a turn (``latest``, a unit vector) is unrelated to the conversation so far (the unit vectors
    of ``earlier`` turns): its mean similarity to them is below ``TOPIC_SHIFT_BELOW``. The mean, not the
    latest turn alone: a short follow-up ("and in Paris?") resembles little by itself, and one stray turn
    must not carry a topic along. No earlier turn: no shift."""
    if not earlier:
        return False
    return sum(float(v @ latest) for v in earlier) / len(earlier) < TOPIC_SHIFT_BELOW


def request_parts(request: str) -> list[str]:
    """The parts of a request that can be ranked alone (split at clause and ``and`` boundaries, each with
    ``REST_MIN_WORDS`` content words); ``[]`` for a request of one part."""
    parts = decompose_query(request, level="and", min_content_words=REST_MIN_WORDS)[1:]
    return parts if len(parts) >= 2 else []


def served_part(closeness: Sequence[float]) -> int:
    """The part a call served: the one the called tool's vector is closest to (the first on a tie)."""
    return max(range(len(closeness)), key=lambda n: closeness[n])


def part_order(parts: int, served: int) -> list[int]:
    """The order the parts are searched in after a call served part ``served``: the parts after it, in the
    request's order (what is asked next is usually done next), then that part itself (one clause may ask
    for two tools: "open data.txt and scan it for Q4"), then those before it."""
    return [*range(served + 1, parts), served, *range(served)]


def one_part_at_a_time(parts: Sequence[Sequence[str]]) -> list[str]:
    """The parts' hits interleaved: every part's best, then every part's second best, and so on (so that a
    few next steps cover several parts instead of the first part's runners-up)."""
    out: list[str] = []
    for rank in range(max((len(p) for p in parts), default=0)):
        for part in parts:
            if rank < len(part) and part[rank] not in out:
                out.append(part[rank])
    return out


def _acts(words: Iterable[str], vocabulary: dict[str, Act]) -> set[Act]:
    found: set[Act] = set()
    for word in words:
        act = vocabulary.get(word)
        for ending in _ENDINGS:  # "remembering", "saved", "stores", "removes": crude, but only for verbs
            if act is None and len(word) > len(ending) + 2 and word.endswith(ending):
                act = vocabulary.get(word[: -len(ending)]) or vocabulary.get(word[: -len(ending)] + "e")
        if act is not None:
            found.add(act)
    return found


def asked_acts(part: str) -> frozenset[Act]:
    """The acts a request part's words ask for: "remember its hash in memory" → write; "forget it" →
    delete; "show me the graph" → none (reading)."""
    return frozenset(_acts(_WORD.findall(part.lower()), _ASKED))


def tool_act(tool_id: str) -> Act | None:
    """The act a tool's name says it does (``create_entities`` → write, ``delete_entities`` → delete,
    ``read_graph`` → None); None when its name says both or neither."""
    acts = _acts(name_words(name_of(tool_id)).split(), _DONE)
    return next(iter(acts)) if len(acts) == 1 else None


def by_request_act(
    part: str,
    hits: Sequence[str],
    subject: Sequence[str] | None = None,
    act_of: Callable[[str], Act | None] = tool_act,
    named: str | None = None,
) -> list[str]:
    """A part's hits (best first) reordered by what the part asks. First the tools of the part's subject
    that do an act it asks for; the subject is the server of the part's best hit, ``subject`` its tools
    closest to the part first (default: those among ``hits``), so that "remember its hash in memory"
    reaches the memory server's writes even when the search ranked its readers and deleters above them,
    and never another server's (``git_create_branch`` creates too). Then the other hits; last the deleting
    tools the part does not ask for. Each group keeps its order. A server the part ``named``
    (``named_source``) is the subject, and its other hits come before other servers' in each group."""
    if not hits:
        return []
    asked = asked_acts(part)
    source = named or (_source(subject[0]) if subject else _source(hits[0]))
    if subject is None:
        subject = [t for t in hits if _source(t) == source]
    first = [t for t in subject if _source(t) == source and (act := act_of(t)) is not None and act in asked]
    rest = [t for t in hits if t not in first]

    def group(tool_id: str) -> tuple[bool, bool]:
        unasked_delete = act_of(tool_id) == "delete" and "delete" not in asked
        return unasked_delete, named is not None and _source(tool_id) != named

    return [*first, *sorted(rest, key=group)]


def named_source(part: str, sources: Iterable[str]) -> str | None:
    """The one server a request part names by every word of its name ("remember its hash in memory" →
    ``memory``), else None (none named, or two). A user who names the system means it: a model that
    learned "hash" is git's still ranks git's tools first for that part."""
    words = set(_WORD.findall(part.lower()))
    named = [s for s in sorted(set(sources)) if (n := name_words(s).split()) and words.issuperset(n)]
    return named[0] if len(named) == 1 else None


def _source(tool_id: str) -> str:
    return tool_id.partition("__")[0]  # ToolRecord.id is ``<source>__<name>``


def evidence_order(
    follow: Iterable[tuple[str, float, EdgeKind]],
    consumers: Iterable[DependencyEdge],
    kinds: Sequence[EdgeKind],
    bar: float,
) -> list[str]:
    """The tools edge evidence says come next, most confident first: ``follow`` (tool, confidence, kind:
    what traffic saw called right after) at or above ``bar``, and ``consumers`` (edges whose dependency is
    the called tool, already walkable) of any origin but learned, whose evidence speaks through ``follow``."""
    if not kinds:
        return []
    score: dict[str, float] = {}
    for tool_id, confidence, kind in follow:
        if kind in kinds and confidence >= bar:
            score[tool_id] = max(confidence, score.get(tool_id, 0.0))
    for edge in consumers:
        if edge.origin != "learned":
            score[edge.tool] = max(edge.confidence, score.get(edge.tool, 0.0))
    return sorted(score, key=lambda t: (-score[t], t))


def next_steps(rest: Sequence[Sequence[str]], evidence: Sequence[str], limit: int = NEXT_STEPS) -> list[str]:
    """The next steps after a call: the rest of the request one part at a time (each part's hits already in
    ``by_request_act`` order), then the evidence, each tool once, at most ``limit``."""
    chosen: list[str] = []
    for tool_id in [*one_part_at_a_time(rest), *evidence]:
        if tool_id not in chosen:
            chosen.append(tool_id)
    return chosen[:limit]


def asked_steps(steps: Sequence[str], parts: Sequence[Sequence[str]]) -> list[str]:
    """Of ``steps`` (``next_steps``), those the request still asks for. ``parts``: each other part's hits as
    ranked (``by_request_act``), published ones included. A part's best tool is asked for when it is a
    step, i.e. nothing published serves the part yet ("remember its hash in memory" after the git call:
    its memory write). The other steps are guesses: a part's runners-up, edge evidence. What is asked
    for joins the published set into free room; a guess only while the set holds fewer tools than one
    answer publishes (``final_k``): past it, a guess is one more tool in every prompt for a step no
    request chose (bench/RESULTS.md, "Prerequisites without traffic")."""
    best = {part[0] for part in parts if part}
    return [t for t in steps if t in best]


@dataclass(frozen=True, slots=True)
class Standing:
    """Why a published tool is there: the latest request that chose it (a find_tools or host turn that
    published it, or a next step after a call in it), and the latest in which it was called (None: never)."""

    chosen: int
    used: int | None = None
    server_used: int | None = None
    """The latest request in which a tool of the same server was called (None: never)."""


def leaving(
    standing: Mapping[str, Standing],
    request: int,
    chosen: Collection[str],
    *,
    topic_moved: bool = False,
    changed: bool = True,
    unseen: Collection[str] = (),
) -> list[str]:
    """The published tools that leave at request number ``request`` (requests count from 1), which chose
    ``chosen``: on a topic move every one it does not choose; otherwise those neither chosen within the
    last ``CHOSEN_KEPT`` requests nor called within the last ``USED_KEPT``. Nothing leaves unless the request
    changes the list anyway (``changed``: it adds a tool) or the topic moved: a removal alone would throw
    away the client's cached list in the middle of a task. ``unseen``: tools the request could not choose
    (their server is down, hidden meanwhile): not passed over, they stay for when it is back."""
    if not (changed or topic_moved):
        return []
    return [
        tool_id
        for tool_id, s in standing.items()
        if tool_id not in chosen
        and tool_id not in unseen
        and (
            topic_moved
            or (
                request - s.chosen > CHOSEN_KEPT
                and (s.used is None or request - s.used > USED_KEPT)
                and not (
                    s.server_used is not None
                    and request - s.server_used <= USED_KEPT
                    and request - s.chosen <= SERVER_KEPT
                )
            )
        )
    ]
