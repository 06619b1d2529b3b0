"""Tool names as words (``toolweave.names``): how names and requests are cut, and the fleet's counts."""

from __future__ import annotations

import math

from toolweave.names import NameVocabulary, name_of, name_terms, name_words, text_terms
from toolweave.records import make_tool_id


def test_names_and_requests_are_cut_into_the_same_stemmed_words() -> None:
    assert name_words("get_stockPrice") == "get stock price"
    assert name_terms("findPetsByTags") == {"find", "pets", "by", "tags"}  # "pet" would be too short
    assert name_terms("track_orders") == text_terms("Where are my ORDERS? Track them!") & {"track", "order"}
    assert name_terms("booking-service") == {"book", "service"}
    # short words stay whole: a four-letter stem is the least a word keeps
    assert name_terms("news_bus") == {"news", "bus"}


def test_name_of_is_the_part_after_the_source() -> None:
    assert name_of("weather__get_forecast") == "get_forecast"
    assert name_of("get_forecast") == "get_forecast"


def test_rare_name_words_weigh_more_than_common_ones() -> None:
    vocab = NameVocabulary.of(["a__get_weather", "a__get_stock_price", "a__get_news", "a__delta_user_login"])
    assert vocab.size == 4
    assert vocab.counts["get"] == 3
    assert vocab.weight("delta") > vocab.weight("get")
    assert math.isclose(vocab.weight("get"), math.log(1 + 4 / 3))
    # "get weather" spelled out in full: the whole name; "get" alone: the common part only
    assert vocab.match(text_terms("get me the weather"), "a__get_weather") == 1.0
    partial = vocab.match(text_terms("get it"), "a__get_weather")
    assert 0 < partial < 0.5
    assert vocab.match(text_terms("log me in"), "a__delta_user_login") == 0.0


def test_a_vocabulary_follows_writes_as_if_counted_afresh() -> None:
    before = ["s__get_weather", "s__get_news", "t__book_table"]
    after = ["s__get_weather", "t__book_table", "t__cancel_booking", "u__get_news_digest"]
    vocab = NameVocabulary.of(before).following(before, after)
    assert vocab == NameVocabulary.of(after)
    assert "news" in vocab.counts and vocab.counts["get"] == 2
    assert NameVocabulary().following([], after) == NameVocabulary.of(after)
    assert NameVocabulary.of(before).following(before, []).size == 0


def test_a_tool_is_counted_by_its_own_name_where_its_id_had_to_change_it() -> None:
    # ids are sanitised and cut to 64 characters with a hash: the id's name part is not always the name
    tools: dict[str, str] = {}
    for name in ("获取天气", "查询股票", "list_deliveries_for_a_repository_webhook_by_organization_and_date"):
        tools[make_tool_id("zh", name, set(tools))] = name
    weather, stocks, deliveries = tools
    assert weather == "zh__tool" and stocks.startswith("zh__tool_") and len(deliveries) == 64
    fleet = [*tools, "en__find_tool", "en__get_weather"]
    vocab = NameVocabulary.of(fleet, tools)
    assert vocab.counts["tool"] == 1  # find_tool's; "zh__tool" was the whole name of an unrelated tool
    assert vocab.match(text_terms("which tool tells the weather?"), weather) == 0.0
    spelled = "list deliveries for a repository webhook by organization and date"
    assert vocab.match(text_terms(spelled), deliveries) == 1.0  # the id's hash is no word of its name
    # leaving, such a tool takes its own terms (none, for the Chinese names) and nothing else
    assert vocab.following(fleet, fleet[1:], tools) == NameVocabulary.of(fleet[1:], tools)
    assert vocab.following(fleet, fleet[3:], tools) == NameVocabulary.of(fleet[3:])
    assert vocab.following(fleet, fleet[3:], tools).counts["tool"] == 1


def test_words_of_any_script_stay_whole() -> None:
    # accented words are not broken at their accents ("m", "t", "o"); ASCII text cuts as before
    assert text_terms("La météo de Zürich") == {"la", "météo", "de", "zürich"}
    assert text_terms("what's the weather") == {"what", "s", "the", "weather"}
    assert name_terms("obtenir_météo") == {"obtenir", "météo"}
    vocab = NameVocabulary.of(["f__obtenir_météo", "f__get_weather"], {"f__obtenir_météo": "obtenir_météo"})
    assert vocab.match(text_terms("quelle est la météo ?"), "f__obtenir_météo") > 0


def test_a_match_is_weighed_by_the_vocabulary_it_was_asked_of() -> None:
    """Matches are cached per vocabulary; a write makes a new vocabulary, whose matches use its own
    counts, not the cached ones of the vocabulary before it."""
    request = text_terms("get the stock price")
    before = NameVocabulary.of(["fin__get_stock_price", "fin__get_news", "fin__list_news"])
    first = before.match(request, "fin__get_stock_price")
    assert before.match(request, "fin__get_stock_price") == first  # the cached answer is the same
    # three more names say "stock" and "price": those words now say less, "get" (in none of them) more
    added = ["fin__stock_price_history", "fin__stock_price_alert", "fin__stock_price_chart"]
    after = before.changed(removed=(), added=added)
    fresh = NameVocabulary.of(["fin__get_stock_price", "fin__get_news", "fin__list_news", *added])
    assert after.match(request, "fin__get_stock_price") == fresh.match(request, "fin__get_stock_price")
    assert after.match(text_terms("get me the news"), "fin__get_stock_price") != before.match(
        text_terms("get me the news"), "fin__get_stock_price"
    )
    assert before.match(request, "fin__get_stock_price") == first  # the old vocabulary is unchanged
