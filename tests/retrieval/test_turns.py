"""Per-turn ranking decisions (``toolweave.retrieval.turns``): pure functions, and the demo fleet's real tools
in a real registry for the act a request part asks for ("remember" → a memory write tool, not a delete)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.edges import edge
from tests.registry.inference.test_dataflow_datasets import demo_fleet
from toolweave.records import EdgeKind
from toolweave.retrieval.turns import (
    FOLLOW_UP_WORDS,
    USED_KEPT,
    Standing,
    asked_acts,
    asked_steps,
    by_request_act,
    conversation_context,
    evidence_order,
    leaving,
    named_source,
    next_steps,
    one_part_at_a_time,
    part_order,
    request_parts,
    served_part,
    tool_act,
    topic_shifted,
)

COMMIT_PROMPT = "show me the last commit of this repository and remember its hash in memory"


def test_conversation_context_is_for_short_follow_ups_only() -> None:
    earlier = ["what time is it in Tokyo"]
    assert conversation_context("and in Paris?", earlier) == earlier
    assert conversation_context(" ".join(["word"] * FOLLOW_UP_WORDS), earlier) == []


def test_topic_shift_is_the_mean_similarity_below_the_bar() -> None:
    x, y = np.array([1.0, 0.0]), np.array([0.0, 1.0])
    assert topic_shifted([y, y], x)
    assert not topic_shifted([x, y], x)  # one stray earlier turn does not make a shift
    assert not topic_shifted([], x)


def test_what_leaves_the_published_set() -> None:
    standing = {
        "guess": Standing(chosen=1),  # chosen by the request before, never called
        "in_use": Standing(chosen=1, used=2),  # called in the request in progress
        "old_use": Standing(chosen=1, used=2 - USED_KEPT),  # called long ago
        "again": Standing(chosen=1),
    }
    assert leaving(standing, 3, ["again", "new"]) == ["guess", "old_use"]
    # a request that adds nothing removes nothing; a topic move clears all it does not choose
    assert leaving(standing, 3, ["again"], changed=False) == []
    assert leaving(standing, 3, ["again"], changed=False, topic_moved=True) == ["guess", "in_use", "old_use"]
    assert leaving({"now": Standing(chosen=3)}, 3, []) == []  # a guess for the request in progress stays
    assert leaving(standing, 3, ["again"], unseen=["guess"]) == ["old_use"]  # its server was down


def test_a_guess_stays_longer_while_its_server_is_in_use(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("toolweave.retrieval.turns.SERVER_KEPT", 1)
    standing = {"fs__cd": Standing(chosen=2, server_used=2), "kv__get": Standing(chosen=2)}
    assert leaving(standing, 3, ["fs__mv"]) == ["kv__get"]
    assert leaving(standing, 4, ["fs__mv"]) == ["fs__cd", "kv__get"]


def test_the_parts_after_the_served_one_come_first() -> None:
    parts = request_parts(COMMIT_PROMPT)
    assert parts == ["show me the last commit of this repository", "remember its hash in memory"]
    assert request_parts("what time is it in Tokyo") == []
    assert served_part([0.4, 0.1]) == 0
    assert part_order(4, 1) == [2, 3, 1, 0]
    assert one_part_at_a_time([["a", "b"], ["c"], ["a", "d"]]) == ["a", "c", "b", "d"]


@pytest.mark.parametrize(
    ("part", "acts"),
    [
        ("remember its hash in memory", {"write"}),
        ("save the report and then forget the draft", {"write", "delete"}),
        ("removes the old entries", {"delete"}),
        ("show me the posts of the student_record.txt", set()),
        ("what is in the knowledge graph", set()),
    ],
)
def test_the_acts_a_part_asks_for(part: str, acts: set[str]) -> None:
    assert asked_acts(part) == acts


def test_the_act_a_tool_name_says() -> None:
    assert tool_act("memory__create_entities") == "write"
    assert tool_act("memory__add_observations") == "write"
    assert tool_act("memory__delete_entities") == "delete"
    assert tool_act("memory__read_graph") is None
    assert tool_act("git__git_log") is None  # a log is read
    assert tool_act("fs__rm") == "delete"


def test_a_part_ranks_the_act_it_asks_for_first_and_unasked_deletes_last() -> None:
    hits = [
        "m__delete_entities",
        "m__read_graph",
        "g__create_branch",
        "m__delete_observations",
        "m__create_entities",
    ]
    assert by_request_act("remember its hash in memory", hits) == [
        "m__create_entities",  # the subject's (the best hit's server's) write, not git's
        "m__read_graph",
        "g__create_branch",
        "m__delete_entities",
        "m__delete_observations",
    ]
    subject = ["m__create_entities", "m__add_observations", "m__read_graph"]  # closest to the part first
    assert by_request_act("remember its hash in memory", hits[:4], subject)[:2] == subject[:2]
    hits = hits[:2] + hits[3:]
    asked = by_request_act("forget the old entities", hits)
    assert asked[:2] == ["m__delete_entities", "m__delete_observations"]
    assert by_request_act("what is in my memory graph", hits)[-2:] == [
        "m__delete_entities",
        "m__delete_observations",
    ]


def test_a_part_that_names_a_server_makes_it_the_subject() -> None:
    sources = ["git", "memory", "file_system", "clock"]
    assert named_source("remember its hash in memory", sources) == "memory"
    assert named_source("save it to the file system", sources) == "file_system"  # every word of the name
    assert named_source("save it to the file", sources) is None
    assert named_source("remember its hash", sources) is None
    assert named_source("copy the git hash into memory", sources) is None  # two named: no guess
    # the search ranked git's tools first (a model that learned "hash" is git's); the named server's write
    # leads, then its other hits before git's, unasked deletes last
    hits = ["g__git_show", "g__git_commit", "m__delete_entities", "m__read_graph"]
    subject = ["m__create_entities", "m__read_graph", "m__delete_entities"]
    assert by_request_act("remember its hash in memory", hits, subject, named="m") == [
        "m__create_entities",
        "m__read_graph",
        "g__git_show",
        "g__git_commit",
        "m__delete_entities",
    ]


def test_next_steps_are_the_request_first_then_the_evidence() -> None:
    assert next_steps([["a", "b"], ["c"]], ["e", "a"], limit=3) == ["a", "c", "b"]
    assert next_steps([], ["e", "a"]) == ["e", "a"]


def test_evidence_is_above_the_bar_and_learned_edges_speak_through_traffic() -> None:
    direct = EdgeKind.TOOL_DIRECTLY_DEPENDS_ON
    follow = [("t__x", 0.6, direct), ("t__weak", 0.3, direct)]
    consumers = [edge("t__y", "t__called", confidence=0.9), edge("t__z", "t__called", origin="learned")]
    kinds = [direct, EdgeKind.PARAMETER_DIRECTLY_DEPENDS_ON]
    assert evidence_order(follow, consumers, kinds, 0.5) == ["t__y", "t__x"]
    assert evidence_order(follow, consumers, [], 0.5) == []


@pytest.mark.integration
def test_remember_after_the_git_call_ranks_a_memory_write_first(shared_embedder, tmp_path: Path) -> None:
    from toolweave.registry import Registry
    from toolweave.retrieval import retrieve_tools
    from toolweave.settings import RetrievalSettings, Settings

    reg = Registry.open(tmp_path / "reg", embedder=shared_embedder, settings=Settings(home=tmp_path / "reg"))
    try:
        tools = demo_fleet()
        for source in {t.source for t in tools}:
            reg.ingest(source, [t for t in tools if t.source == source])
        part = request_parts(COMMIT_PROMPT)[1]
        params = RetrievalSettings(decompose="off")
        hits = [r.tool_id for r in retrieve_tools(reg, part, params) if r.publish]
        # as the turn engine does: the best hit's server's tools, closest to the part first
        vectors, (part_vector,) = reg.vectors(), shared_embedder.embed_queries([part])
        source = hits[0].partition("__")[0]
        subject = sorted(
            (t for t in vectors if t.startswith(source + "__")),
            key=lambda t: -float(vectors[t] @ part_vector),
        )
    finally:
        reg.close()
    assert hits[0].startswith("memory__")  # the part finds the memory server...
    assert "memory__create_entities" not in hits[:3]  # ...but not its write: that is what the act is for
    ordered = by_request_act(part, hits, subject)
    assert tool_act(ordered[0]) == "write" and ordered[0].startswith("memory__"), (hits, ordered)
    assert tool_act(ordered[1]) == "write" and ordered[1].startswith("memory__"), (hits, ordered)
    assert not [t for t in ordered[:4] if tool_act(t) == "delete"], ordered


def test_a_part_nothing_serves_yet_asks_for_its_best_tool_the_rest_are_guesses() -> None:
    # the other parts' hits as ranked, published ones included
    parts = [["memory__create_entities", "memory__read_graph"], ["git__git_show", "time__now"]]
    steps = ["memory__create_entities", "memory__read_graph", "time__now"]  # git_show is published
    # the memory part's best: nothing published serves it; the others are a runner-up and a served
    # part's other hit
    assert asked_steps(steps, parts) == ["memory__create_entities"]
    assert asked_steps(["git__git_show"], []) == []  # edge evidence
