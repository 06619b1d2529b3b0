"""Universe groupings carried from one ingest to the next equal fresh ones, and so do the edges."""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path

from tests.registry.inference.test_inference_incremental import ONLINE, SHOP, UTIL
from toolweave.inference.infer import infer_among
from toolweave.inference.producers import ToolProfile, profile
from toolweave.inference.universe import Universe, _group, group_by, in_order
from toolweave.records import ToolRecord
from toolweave.registry.catalog import load_catalog
from toolweave.registry.inferred_edges import ProfileCache


def _changed(t: ToolRecord, n: int) -> ToolRecord:
    """``t`` with other content that matters to the rules: new inputs and a description that says what
    it returns (so its keys, wanted and offered, change)."""
    schema = dict(t.input_schema)
    schema["properties"] = {**schema.get("properties", {}), f"order_{n}_id": {"type": "string"}, "date": {}}
    return t.model_copy(
        update={
            "description": f"Returns the current date and a session_token. {t.description}",
            "input_schema": schema,
        }
    )


def test_carried_groupings_give_the_edges_and_groupings_of_fresh_ones(
    dataset_dir: Callable[[str], Path],
) -> None:
    tools = [
        t
        for name in ("toollinkos", "api_bank", "openapi_links")
        for t in load_catalog([dataset_dir(name)], name, require_description=False).tools
    ]
    tools += SHOP + UTIL + ONLINE
    rng = random.Random(3)
    rng.shuffle(tools)
    present = {t.id: t for t in tools[:500]}
    waiting = tools[500:]
    cache = ProfileCache()
    carried = 0
    for step in range(8):
        if step:  # an ingest: some tools new, some changed, some gone
            focus = set()
            for t in waiting[:25]:
                present[t.id] = t
                focus.add(t.id)
            waiting = waiting[25:]
            for n, tool_id in enumerate(rng.sample(sorted(present), 12)):
                present[tool_id] = _changed(present[tool_id], n)
                focus.add(tool_id)
            for tool_id in rng.sample(sorted(present.keys() - focus), 10):
                waiting.append(present.pop(tool_id))
        else:
            focus = set(present)
        universe = cache.universe(present, {i: t.content_hash for i, t in present.items()})
        carried += bool(universe._groupings)
        fresh = [profile(present[i]) for i in sorted(present)]
        assert [p.id for p in universe] == [p.id for p in fresh]
        assert infer_among(universe, focus) == infer_among(fresh, focus), step
        for keys, grouping in universe._groupings.items():
            expected = _group(fresh, keys)
            assert {k: [p.id for p in v] for k, v in grouping.items()} == {
                k: [p.id for p in v] for k, v in expected.items()
            }
    assert carried == 7, "every ingest after the first must carry the groupings over"


def test_a_plain_sequence_is_grouped_afresh_and_in_order_finds_ids() -> None:
    profiles = [profile(t) for t in sorted(SHOP + UTIL, key=lambda t: t.id)]
    universe = Universe(profiles)

    def verb(p: ToolProfile) -> tuple[str, ...]:
        return (p.verb,)

    assert group_by(universe, verb) is group_by(universe, verb)  # kept
    assert group_by(profiles, verb) is not group_by(profiles, verb)  # a list keeps nothing
    assert dict(group_by(profiles, verb)) == dict(group_by(universe, verb))
    wanted = {"util__validate_email", "shop__shop_checkout", "nope"}
    assert in_order(universe, wanted) == in_order(profiles, wanted) == [p for p in profiles if p.id in wanted]
