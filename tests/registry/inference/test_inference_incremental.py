"""Incremental inference: adding a source computes edges from and to its tools only."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from tests.registry.inference.inference_helpers import tool
from toolweave.inference import infer_edges
from toolweave.inference.infer import infer_among
from toolweave.inference.universe import Universe
from toolweave.records import DependencyEdge, EdgeKind, ToolRecord
from toolweave.registry.catalog import load_catalog
from toolweave.registry.graph import DependencyGraph
from toolweave.registry.inferred_edges import ProfileCache, refresh_inferred_edges
from toolweave.registry.overrides import EdgeSelector, GraphOverrides

SHOP = [
    tool("shop", "shop_user_login", "Log in to the shop.", {"email": ""}),
    tool("shop", "shop_list_carts", "List carts.", {"session_id": ""}),
    tool("shop", "shop_checkout", "Check out a cart.", {"session_id": "", "cart_id": ""}),
]
UTIL = [
    tool("util", "validate_email", "Check that an email address is valid.", {"email": ""}, kind="core"),
    tool("util", "get_current_date", "Returns the current date.", {}, kind="core"),
]


def profiles(by_id: dict[str, ToolRecord]) -> Universe:
    return ProfileCache().universe(by_id, {i: t.content_hash for i, t in by_id.items()})


def graph_of(tools: list[ToolRecord]) -> DependencyGraph:
    g = DependencyGraph()
    for t in tools:
        g.add_tool(t.id, t.kind, t.source)
    return g


def test_only_for_returns_edges_touching_the_new_tools() -> None:
    before = infer_edges(SHOP)
    new = infer_edges(UTIL, known=SHOP)
    assert new, "the new utility tools must get edges"
    ids = {t.id for t in UTIL}
    assert all(e.tool in ids or e.depends_on in ids for e in new)
    assert ("shop__shop_user_login", "util__validate_email") in {(e.tool, e.depends_on) for e in new}
    # union of the two incremental runs == one full run
    full = {e.key for e in infer_edges(SHOP + UTIL)}
    assert {e.key for e in before} | {e.key for e in new} == full


def test_refresh_keeps_untouched_edges_and_adds_edges_for_the_new_source() -> None:
    g = graph_of(SHOP)
    by_id = {t.id: t for t in SHOP}
    assert refresh_inferred_edges(g, profiles(by_id), None, set(by_id)) > 0
    shop_edges = {e.key: e for e in g.edges()}
    for t in UTIL:
        g.add_tool(t.id, t.kind, t.source)
    by_id.update({t.id: t for t in UTIL})
    added = refresh_inferred_edges(g, profiles(by_id), None, {t.id for t in UTIL})
    assert added > 0
    after = {e.key: e for e in g.edges()}
    for key, edge in shop_edges.items():
        assert after[key] == edge
    assert any(e.depends_on == "util__validate_email" for e in g.dependencies("shop__shop_user_login"))


def test_declared_edges_win_and_declaring_sources_get_no_inferred_edges() -> None:
    g = graph_of(SHOP + UTIL)
    declared = DependencyEdge(
        tool="shop__shop_checkout",
        depends_on="shop__shop_list_carts",
        kind=EdgeKind.PARAMETER_DIRECTLY_DEPENDS_ON,
        parameter_name="cart_id",
    )
    g.add_edge(declared)
    by_id = {t.id: t for t in SHOP + UTIL}
    refresh_inferred_edges(g, profiles(by_id), None, set(by_id))
    # shop declares its own edges: nothing inferred out of its tools
    assert [e for e in g.edges() if e.tool.startswith("shop__") and e.origin == "inferred"] == []
    assert list(g.edges()) == [declared]


def test_refresh_respects_manifest_removals() -> None:
    g = graph_of(SHOP)
    by_id = {t.id: t for t in SHOP}
    overrides = GraphOverrides(remove=[EdgeSelector("shop__shop_list_carts", "shop__shop_user_login")])
    refresh_inferred_edges(g, profiles(by_id), None, set(by_id), overrides=overrides)
    assert "shop__shop_user_login" not in {e.depends_on for e in g.dependencies("shop__shop_list_carts")}
    assert "shop__shop_user_login" in {e.depends_on for e in g.dependencies("shop__shop_checkout")}


def test_the_focused_similarity_pass_proposes_what_the_full_pass_keeps() -> None:
    """An incremental ingest compares tools outside the focus with the focus's utilities only: the
    edges touching the focus must be exactly those a full pass would give (and none other)."""
    import numpy as np

    from toolweave.inference.producers import profile
    from toolweave.inference.similarity import similarity_edges

    rng = np.random.default_rng(7)
    tools = [
        *(tool("util", f"get_status_{n}", f"Reports status {n}.", {}, kind="core") for n in range(6)),
        *(tool("app", f"do_task_{n}", f"Does task {n}.", {"x": ""}) for n in range(30)),
    ]
    base = rng.normal(size=(6, 16))
    vectors = {}
    for n, t in enumerate(tools):  # every app tool is a near-copy of one utility, some of two
        v = base[n % 6] + (0.3 * base[(n + 1) % 6] if n % 4 == 0 else 0) + 0.05 * rng.normal(size=16)
        vectors[t.id] = (v / np.linalg.norm(v)).astype(np.float32)
    universe = [profile(t) for t in tools]
    full = {e.key for e in similarity_edges(universe, vectors, threshold=0.8)}
    assert len(full) > 10, "the fixture must make similarity edges"
    for focus in ({"app__do_task_3", "app__do_task_8"}, {"util__get_status_2", "app__do_task_11"}):
        focused = {e.key for e in similarity_edges(universe, vectors, threshold=0.8, focus=focus)}
        expected = {k for k in full if k[0] in focus or k[1] in focus}
        assert expected and focused == expected


def test_near_identical_input_free_tools_are_linked_to_a_few_utilities_each_not_to_all() -> None:
    """Thousands of near-identical tools without inputs are all utilities and all above the threshold
    with one another: each keeps its ``SIMILARITY_MAX_PER_TOOL`` most similar (tools x tools edges
    exhausted memory at 10k), and a focused pass still gives exactly the full pass's edges it touches."""
    import numpy as np

    from toolweave.inference.producers import profile
    from toolweave.inference.similarity import SIMILARITY_MAX_PER_TOOL, similarity_edges

    rng = np.random.default_rng(3)
    tools = [tool("big", f"big_op{n}", f"Operation {n} of the big service.", {}) for n in range(40)]
    common = rng.normal(size=16)
    vectors = {}
    for t in tools:
        v = common + 0.2 * rng.normal(size=16)
        vectors[t.id] = (v / np.linalg.norm(v)).astype(np.float32)
    universe = [profile(t) for t in tools]
    assert all(p.is_ambient for p in universe), "the fixture must make every tool a utility"
    full = list(similarity_edges(universe, vectors, threshold=0.8))
    per_tool = Counter(e.tool for e in full)
    assert per_tool and max(per_tool.values()) == SIMILARITY_MAX_PER_TOOL < len(tools) - 1
    for t in tools:  # the kept ones are the most similar
        kept = {e.depends_on for e in full if e.tool == t.id}
        if not kept:
            continue
        sims = {o.id: float(vectors[o.id] @ vectors[t.id]) for o in tools if o.id != t.id}
        assert min(sims[k] for k in kept) >= max(v for o, v in sims.items() if o not in kept) - 1e-6
    keys = {e.key for e in full}
    for focus in ({"big__big_op3"}, {"big__big_op0", "big__big_op17", "big__big_op39"}):
        focused = {e.key for e in similarity_edges(universe, vectors, threshold=0.8, focus=focus)}
        assert focused == {k for k in keys if k[0] in focus or k[1] in focus}


def _touching(edges: list[DependencyEdge], focus: set[str]) -> list[DependencyEdge]:
    return [e for e in edges if e.tool in focus or e.depends_on in focus]


ONLINE = [
    tool("o", "get_wifi_status", "Returns whether Wi-Fi connectivity is up.", {}, kind="core"),
    tool("o", "stream_song", "Stream a song from the online catalogue.", {"song": ""}),
    tool("o", "upload_photo", "Upload a photo to the cloud.", {"photo": ""}),
    tool("o", "fetch_news", "Read the news from the web.", {"topic": ""}),
    tool("o", "book_table", "Book a table at a restaurant.", {"restaurant": ""}),
    tool("o", "play_playlist", "Play a playlist.", {"playlist": ""}),
    tool("o", "get_volume", "Returns the volume.", {}),
    tool("o", "set_volume", "Set the volume.", {"level": ""}),
]


def _check_focused_runs(tools: list[ToolRecord], focuses: list[set[str]]) -> list[DependencyEdge]:
    """Each rule runs only for the change and the tools that want what it offers (``Rule.wants`` /
    ``offers``): the edges touching the change must be those of a run over every tool. A rule whose
    keys miss a link it can make fails here."""
    universe = profiles({t.id: t for t in tools})
    full = infer_among(universe, {p.id for p in universe})
    for focus in focuses:
        assert infer_among(universe, focus) == _touching(full, focus), sorted(focus)[:3]
    return full


def test_focused_rules_give_the_full_runs_edges_on_the_datasets(dataset_dir: Callable[[str], Path]) -> None:
    from tests.registry.inference.test_dataflow_datasets import demo_fleet
    from toolweave.benchmark.gold_graphs import gold_graph

    names = ("toollinkos", "api_bank", "openapi_links", "nestful_graph", "taskbench_multimedia")
    tools = [t for name in names if dataset_dir(name) for t in gold_graph(name)[0]]
    tools += SHOP + UTIL + demo_fleet()
    ids = sorted(t.id for t in tools)
    rng = random.Random(5)
    focuses = [set(ids[n::9]) for n in range(9)]  # every tool is in one of these
    focuses += [{i} for i in rng.sample(ids, 40)] + [{t.id for t in SHOP}, {t.id for t in UTIL}]
    full = _check_focused_runs(tools, focuses)
    assert len(full) > 900 and any(e.evidence.startswith("dataflow_rule") for e in full)


def test_focused_rules_give_the_full_runs_edges_where_the_network_prior_holds() -> None:
    ids = [t.id for t in ONLINE]
    full = _check_focused_runs(ONLINE, [{i} for i in ids] + [{a, b} for a in ids[:3] for b in ids[3:]])
    assert {e.evidence.split(":")[0] for e in full} >= {"connectivity_prior_rule", "state_pair_rule/setter"}


def test_a_small_change_runs_the_rules_for_few_tools() -> None:
    """The point of the keys: one new tool is not a reason to run a rule for every tool."""
    from toolweave.inference.infer import _reaching
    from toolweave.inference.rules import RULES, Scope

    fleet = [tool("app", f"do_task_{n}", f"Does task {n}.", {f"thing_{n}_id": ""}) for n in range(200)]
    universe = profiles({t.id: t for t in [*fleet, *SHOP, *UTIL]})
    new = next(p for p in universe if p.id == "shop__shop_list_carts")
    visited = {
        rule.name: len(_reaching(rule, universe, Scope({new.id}, set(rule.offers(new))), [new]))
        for rule in RULES
    }
    assert max(visited.values()) < 10, visited


def test_a_focused_rule_builds_only_edges_touching_its_focus(dataset_dir: Callable[[str], Path]) -> None:
    """The reached tools that keep their old producer cost no edge (most of a 100k-tool ingest's rule
    work was building edges that were then dropped); the full-run equality above says none is missed."""
    from toolweave.inference.infer import _reaching
    from toolweave.inference.rules import RULES, Scope

    tools = load_catalog([dataset_dir("toollinkos")], "toollinkos", require_description=False).tools
    universe = profiles({t.id: t for t in [*tools, *SHOP, *UTIL]})
    changed = [p for p in universe if p.source != "toollinkos"]
    focus = {p.id for p in changed}
    built = 0
    for rule in RULES:
        scope = Scope(focus, {key for p in changed for key in rule.offers(p)})
        edges = list(rule(_reaching(rule, universe, scope, changed), universe, scope))
        assert all(e.tool in focus or e.depends_on in focus for e in edges), rule.name
        built += len(edges)
    assert built > 0


def test_the_profile_cache_profiles_only_what_changed() -> None:
    read: list[str] = []

    class Records(dict[str, ToolRecord]):
        def __getitem__(self, key: str) -> ToolRecord:
            read.append(key)
            return super().__getitem__(key)

    cache = ProfileCache()
    records = Records({t.id: t for t in SHOP + UTIL})
    hashes = {i: t.content_hash for i, t in records.items()}
    first = {p.id: p for p in cache.universe(records, hashes)}
    assert sorted(read) == sorted(first) and list(first) == sorted(first)
    read.clear()
    changed = SHOP[1].model_copy(update={"description": "List the carts of a user."})
    records[changed.id] = changed
    del records[UTIL[0].id]
    hashes = {i: t.content_hash for i, t in records.items()}
    second = {p.id: p for p in cache.universe(records, hashes)}
    assert read == [changed.id]
    assert second[changed.id].description == "list the carts of a user."
    assert UTIL[0].id not in second
    assert all(second[i] is first[i] for i in second if i != changed.id)
