"""Name match (``retrieval.name_match``): a candidate whose name the request spells out moves up."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import pytest

from toolweave.names import NameVocabulary
from toolweave.records import Hit
from toolweave.retrieval.name_match import match_names

FLEET = NameVocabulary.of(
    ["f__get_weather", "f__get_forecast", "f__create_qr_code", "f__qreator", "f__get_news", "f__search"]
)


def test_the_candidate_the_request_names_moves_up() -> None:
    fused = [
        Hit("f__qreator", 2.0),
        Hit("f__search", 1.0),
        Hit("f__create_qr_code", 1.6),
        Hit("f__get_news", 0.1),
    ]
    ranked = match_names(fused, "Please create a QR code for this link", FLEET, 1.0)
    assert ranked[0].tool_id == "f__create_qr_code"
    # the others keep their fused scores and order
    assert [(h.tool_id, h.score) for h in ranked[1:]] == [
        ("f__qreator", 2.0),
        ("f__search", 1.0),
        ("f__get_news", 0.1),
    ]


def test_the_lift_is_in_units_of_the_fused_spread() -> None:
    request = "what's the weather"
    match = FLEET.match(frozenset({"what", "s", "the", "weather"}), "f__get_weather")
    assert 0 < match < 1  # "weather" spelled out, "get" not
    for scale in (1.0, 10.0):  # the same lift, relative to the scores, whatever the fusion's scale
        fused = [Hit("f__get_news", 3.0 * scale), Hit("f__get_weather", 1.0 * scale)]
        lifted = dict((h.tool_id, h.score) for h in match_names(fused, request, FLEET, 2.0))
        # population standard deviation of (3, 1) is 1
        assert lifted["f__get_weather"] == pytest.approx(scale * (1.0 + 2.0 * match))
        assert lifted["f__get_news"] == 3.0 * scale


def test_a_common_word_lifts_less_than_a_rare_one() -> None:
    fused = [Hit("f__search", 1.0), Hit("f__get_news", 0.0), Hit("f__get_forecast", 0.0)]
    ranked = match_names(fused, "get the forecast", FLEET, 1.0)
    lift = {h.tool_id: h.score for h in ranked}
    assert lift["f__get_forecast"] > lift["f__get_news"] > 0.0  # both say "get"; one also "forecast"


def test_weight_zero_or_no_spread_changes_nothing() -> None:
    fused = [Hit("f__qreator", 2.0), Hit("f__create_qr_code", 1.0)]
    assert match_names(fused, "create a qr code", FLEET, 0.0) == fused
    flat = [Hit("f__qreator", 1.0), Hit("f__create_qr_code", 1.0)]
    assert match_names(flat, "create a qr code", FLEET, 1.0) == flat
    assert match_names(fused[:1], "create a qr code", FLEET, 1.0) == fused[:1]


@pytest.mark.parametrize("odd", [math.inf, -math.inf, math.nan])
def test_a_score_that_is_not_finite_leaves_the_list_as_fused(odd: float) -> None:
    # one such score made the spread NaN, and NaN was added to every candidate's score
    fused = [Hit("f__qreator", 2.0), Hit("f__create_qr_code", odd), Hit("f__search", 0.5)]
    ranked = match_names(fused, "create a qr code", FLEET, 1.0)
    assert [h.tool_id for h in ranked] == [h.tool_id for h in fused]
    assert [h.score for h in ranked[::2]] == [2.0, 0.5]


def test_scores_near_the_float_limit_leave_the_list_as_fused() -> None:
    # the spread overflowed (OverflowError out of the square, or an infinite spread times a match of 0)
    for high in (1e308, 1e200):
        fused = [Hit("f__qreator", high), Hit("f__search", -high), Hit("f__create_qr_code", 0.0)]
        assert match_names(fused, "create a qr code", FLEET, 1.0) == fused


@pytest.mark.integration
def test_a_registry_counts_its_names_and_retrieval_reads_them(
    dataset_dir: Callable[[str], Path],
    shared_embedder,
    tmp_path: Path,
) -> None:
    """On a real registry (MetaTool's 199 tools, LanceDB, the real embedder): the vocabulary follows
    ingests and deletions, and a request that names a tool ("generate a QR code", gold
    ``create_qr_code``) gets it first only with the name match on (``qreator`` leads without)."""
    from toolweave.benchmark import load_dataset
    from toolweave.registry import Registry
    from toolweave.retrieval.pipeline import retrieve
    from toolweave.settings import RetrievalSettings, Settings

    data = load_dataset(str(dataset_dir("metatool")))
    reg = Registry.open(tmp_path / "reg", embedder=shared_embedder, settings=Settings(home=tmp_path / "reg"))
    try:
        reg.ingest("metatool", data.tools, [])
        extra = [t.model_copy(update={"source": "extra", "id": f"extra__{t.name}"}) for t in data.tools[:3]]
        reg.ingest("extra", extra, [])
        assert reg.name_vocabulary() == NameVocabulary.of(t.id for t in reg.tools())
        reg.ingest("extra", [])
        assert reg.name_vocabulary() == NameVocabulary.of(f"metatool__{t.name}" for t in data.tools)

        def first(name_match: float) -> str:
            # two turns on a fresh registry: its fleet record is warming up (plain z-scores)
            params = RetrievalSettings(method="hybrid", decompose="off", name_match=name_match)
            query = "Could you please generate a QR code for a WhatsApp message?"
            return retrieve(query, reg, reg.dependencies, params, source_of=reg.source_of)[0].tool_id

        assert first(0.0) == "metatool__qreator"
        assert first(1.0) == "metatool__create_qr_code"
    finally:
        reg.close()
