"""Algorithm 1 of Graph RAG-Tool Fusion, walking only what is likely needed.

The paper's walk lists ``tool 1, its dependencies (pre-order DFS), tool 2, its dependencies, ...``
with every tool once, cut to ``final_k``. Cycles are harmless (a tool is never visited twice) and
``d_limit`` bounds the depth (1 = direct dependencies only, 0 = no limit).

A graph walked blindly hurts even when every edge is true: a tool fed by many producers (NESTFUL's
calculators take an ``amount`` that a dozen tools give, in different requests) pulls them all in, and
an edge inferred from a naming pattern (a travel API's ``access_token`` comes from its login) puts a
step the conversation already took at rank 2. So each dependency weighs what the walk knows of it
(``WalkPolicy``), and takes its place among the search hits by that weight:

- a search hit weighs its relevance in the turn (best hit 1, weakest candidate 0);
- a dependency weighs its parent's weight times the edge's confidence, shared among the alternatives
  when several tools can give the same parameter (``1 / n``); a dependency that is itself a search hit
  weighs at least its own relevance;
- a dependency weighing less than ``min_weight`` (``inferred_min_weight`` when reached through an
  inferred edge: its weight already carries the rule's calibrated confidence, so a guess no second gold
  source confirmed is walked from a clear hit only), is not walked; nor is another producer of a
  parameter a listed tool already gives;
- nor is the producer of a content parameter (``CONTENT_WORDS``: the text, query, keywords, title or
  message a tool works on), which the request itself supplies: "find reviews of the Dyson Airwrap" says
  what to search, and the tool that could produce a search keyword (a book search, a dictionary, a
  translator: NESTFUL's graph holds such chains) is not needed.

Declared edges have confidence 1: a tool's only producer weighs what the tool weighs, so it follows
it directly, as in the paper. A doubtful edge's dependency goes after the hits that stand above it.
``WalkPolicy.everything()`` is the paper's walk. Orderings and filters measured and not shipped live
in the lab (``bench/walk_orderings.py``, ``bench/walk_variants.py``, ``bench/labs/supplied.py``), which
walks with its own rules through one public seam: a ``WalkPolicy`` subclass whose ``chooser`` returns
another ``Choice``.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace

from toolweave.names import name_words
from toolweave.records import DependencyEdge, EdgeKind
from toolweave.retrieval.results import Hit, RankedTool

__all__ = [
    "CONTENT_WORDS",
    "CUT_ORIGINS",
    "Choice",
    "Chooser",
    "DependencyLookup",
    "WalkPolicy",
    "dependency_entry",
    "expand_with_dependencies",
    "is_content_edge",
    "walk_edges",
]

CUT_ORIGINS = frozenset({"inferred"})
"""The edges ``inferred_min_weight`` applies to: those inferred from names and schemas, where it was
chosen.
Declared and manifest edges are someone's word; learned edges are what traffic showed, on a scale of
their own (two sessions of a specific value: 0.5), and cutting them cost BFCL multi-turn's learning half
0.007 mAP@10 (bench/HISTORY.md, "A walk that only helps"): both count 1 there, and every edge's confidence
still weighs its dependency."""

CONTENT_WORDS = frozenset(
    {"text", "word", "words", "query", "q", "keyword", "keywords", "title", "message", "content"}
    | {"phrase", "sentence", "term", "terms", "search"}
)
"""The last word of a content parameter's name: the words a tool works on, which a request states."""

DependencyLookup = Callable[[str, Sequence[EdgeKind] | None], Sequence[DependencyEdge]]
"""``dependencies(tool_id, kinds)`` → the tool's outgoing edges, in a stable order."""


Choice = Callable[[str, Sequence[DependencyEdge], float], list[tuple[DependencyEdge, float]]]
"""``(tool, its edges, its weight) → the edges to walk, each with the weight of its dependency``."""


@dataclass(frozen=True)
class WalkPolicy:
    """How the walk weighs dependencies. Not settings: the defaults are the gateway's, chosen
    leave-one-dataset-out (bench/HISTORY.md, "A walk that only helps"; ``bench/walk_lab.py``)."""

    confidence_power: float = 1.0
    """A dependency weighs its parent's weight × the edge's confidence ** this (0: as much as its parent,
    i.e. right after it)."""
    alternatives_power: float = 1.0
    """A producer among ``n`` of one parameter (same parameter and edge kind) weighs ``1 / n ** this``:
    a value many tools can give is rarely needed from one of them in particular."""
    min_weight: float = 0.4
    """A dependency reached through a declared, manifest or learned edge weighing less is not walked."""
    inferred_min_weight: float = 0.2
    """A dependency reached through an inferred edge weighing less is not walked. Its weight carries the
    edge's calibrated confidence (1/3 for a rule no second gold source confirmed), so this is not a bar
    on the edge but on the edge and the hit together: a guess is walked from a clear hit (relevance ≥ 0.6
    at 1/3), placed after the hits above it. Chosen leave-one-dataset-out over every stored inferred
    edge (bench/RESULTS.md, "Prerequisites without traffic"); every fold but ToolLinkOS's picks 0.2."""
    skip_fed: bool = True
    """No other producer is walked for a parameter that a tool already listed gives."""
    skip_content: bool = True
    """The producer of a content parameter is not walked (``is_content_edge``)."""

    def chooser(self, seen: set[str], relevance: Mapping[str, float]) -> Choice:
        """The edges one turn's walk follows out of each tool (``seen``: the tools listed so far, which
        the walk updates; ``relevance``: each candidate's in the turn). The lab's one seam: a subclass
        returns another ``Choice`` to walk with a rule not shipped (``bench/walk_variants.py``)."""
        return Chooser(self, seen, relevance)

    @classmethod
    def everything(cls) -> WalkPolicy:
        """The paper's walk: every edge, each dependency right after the tool that needs it."""
        return cls(
            confidence_power=0.0,
            alternatives_power=0.0,
            min_weight=0.0,
            inferred_min_weight=0.0,
            skip_fed=False,
            skip_content=False,
        )


def expand_with_dependencies(
    hits: Sequence[Hit],
    dependencies: DependencyLookup,
    *,
    top_k: int,
    final_k: int,
    d_limit: int = 0,
    edge_kinds: Sequence[EdgeKind] | None = None,
    keep: Callable[[str], bool] | None = None,
    relevance: Mapping[str, float] | None = None,
    policy: WalkPolicy | None = None,
) -> list[RankedTool]:
    """``hits[:top_k]`` with the dependencies ``policy`` walks from them, and the later hits, ranked by
    weight (ties in the paper's order: a hit, then its walk), cut to ``final_k``.

    ``keep`` filters tools that must not be returned (e.g. of an unreachable upstream): they are
    neither listed nor walked through. ``relevance`` is each candidate's relevance within the turn
    (``turn_relevance(hits)``: the best hit 1); without it every hit weighs 1.
    """
    policy = policy or WalkPolicy()
    relevance = relevance or {}
    out: list[RankedTool] = []
    weights: list[float] = []
    seen: set[str] = set()
    choose = policy.chooser(seen, relevance)

    def emit_hit(hit: Hit) -> None:
        if hit.tool_id not in seen:
            seen.add(hit.tool_id)
            out.append(RankedTool(hit.tool_id, len(out) + 1, "first_pass", hit.score))
            weights.append(relevance.get(hit.tool_id, 1.0))

    for hit in hits[:top_k]:
        emit_hit(hit)
        root = relevance.get(hit.tool_id, 1.0)
        for edge, depth, weight in walk_edges(
            hit.tool_id, dependencies, d_limit, edge_kinds, seen, keep, root, choose
        ):
            seen.add(edge.depends_on)
            # a dependency that is itself a strong search hit keeps its own place
            weights.append(max(weight, relevance.get(edge.depends_on, 0.0)))
            out.append(dependency_entry(edge, len(out) + 1, depth))
    # a later hit may outweigh a dependency listed before it; it can enter the first final_k only while
    # fewer than final_k tools weigh at least as much (hits come best first: none after it can either)
    placed = sorted(weights)
    for hit in hits[top_k:]:
        if hit.tool_id in seen:
            continue
        above = len(placed) - bisect_left(placed, relevance.get(hit.tool_id, 1.0))
        if above >= final_k:
            break
        emit_hit(hit)
        insort(placed, weights[-1])
    order = sorted(range(len(out)), key=lambda n: (-weights[n], n))[:final_k]
    return [out[n] if out[n].rank == rank else replace(out[n], rank=rank) for rank, n in enumerate(order, 1)]


def is_content_edge(edge: DependencyEdge) -> bool:
    """Whether ``edge`` feeds a content parameter (its name's last word is in ``CONTENT_WORDS``), from a
    graph that says where such a value *can* come from. Not a learned edge: traffic saw the value come
    from the producer, not from the request."""
    if edge.origin == "learned" or not edge.parameter_name:
        return False
    words = name_words(edge.parameter_name).split()
    return bool(words) and words[-1] in CONTENT_WORDS


def dependency_entry(edge: DependencyEdge, rank: int, depth: int) -> RankedTool:
    """The list entry of a tool the walk reached along ``edge``, ``depth`` hops from its search hit."""
    return RankedTool(
        edge.depends_on,
        rank,
        "dependency",
        edge.confidence,
        via=edge.tool,
        edge_kind=edge.kind,
        parameter_name=edge.parameter_name,
        depth=depth,
    )


def walk_edges(
    root: str,
    dependencies: DependencyLookup,
    d_limit: int,
    kinds: Sequence[EdgeKind] | None,
    seen: set[str],
    keep: Callable[[str], bool] | None,
    weight: float = 1.0,
    choose: Choice | None = None,
) -> Iterator[tuple[DependencyEdge, int, float]]:
    """Pre-order DFS without recursion (a 10k-tool chain must not hit Python's recursion limit), over
    the edges ``choose`` keeps at each tool (all of them, at the root's weight, without it).

    ``seen`` is shared with the caller and updated by it as edges are yielded.
    """

    def out_of(tool: str, w: float) -> Iterator[tuple[DependencyEdge, float]]:
        edges = dependencies(tool, kinds)
        return iter(choose(tool, edges, w) if choose is not None else [(e, w) for e in edges])

    stack: list[tuple[Iterator[tuple[DependencyEdge, float]], int]] = [(out_of(root, weight), 1)]
    while stack:
        edges, depth = stack[-1]
        step = next(edges, None)
        if step is None:
            stack.pop()
            continue
        edge, w = step
        target = edge.depends_on
        if target in seen or target == root or (keep is not None and not keep(target)):
            continue
        yield edge, depth, w
        if d_limit == 0 or depth < d_limit:
            stack.append((out_of(target, w), depth + 1))


class Chooser:
    """The edges one turn's walk follows out of a tool, each with its dependency's weight."""

    def __init__(self, policy: WalkPolicy, seen: set[str], relevance: Mapping[str, float]) -> None:
        self.policy, self.seen, self.relevance = policy, seen, relevance

    def __call__(
        self, tool: str, edges: Sequence[DependencyEdge], weight: float
    ) -> list[tuple[DependencyEdge, float]]:
        if not edges:
            return []
        policy = self.policy
        # (parameter, kind) -> its producers: alternatives for one value. A direct and an indirect
        # dependency of one parameter play different parts (where the value comes from; what converts
        # or checks it), so they are no alternatives. An edge without a parameter stands alone.
        groups: dict[tuple[str, EdgeKind] | int, list[DependencyEdge]] = {}
        for n, edge in enumerate(edges):
            if policy.skip_content and is_content_edge(edge):
                continue
            key = (edge.parameter_name, edge.kind) if edge.parameter_name else n
            groups.setdefault(key, []).append(edge)
        share: dict[int, float] = {}
        for members in groups.values():
            if policy.skip_fed and len(members) > 1 and any(e.depends_on in self.seen for e in members):
                continue  # a producer of this parameter is already listed: it needs no other
            for e in members:
                share[id(e)] = len(members) ** -policy.alternatives_power
        out = []
        for edge in edges:
            if id(edge) not in share:
                continue
            w = weight * edge.confidence**policy.confidence_power * share[id(edge)]
            floor = policy.inferred_min_weight if edge.origin in CUT_ORIGINS else policy.min_weight
            if w >= floor:
                out.append((edge, w))
        return out
