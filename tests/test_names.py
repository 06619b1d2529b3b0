"""Tool names as words (``toolweave.names``): how names and requests are cut, and the fleet's counts."""

from __future__ import annotations

import math

from toolweave.names import NameVocabulary, name_of, name_terms, name_words, text_terms


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
