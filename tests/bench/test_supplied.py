"""Which values a request already holds (``bench/labs/supplied.py``, the walk's request-value rule: a lab
variant, not shipped): what a parameter takes, read from its schema and name; which literals a request
holds; whether one supplies the other. The rule's walks: ``test_lab_variants``."""

from __future__ import annotations

from typing import Any

import pytest
from labs.supplied import parameter_shape, request_values, supplies, takes_value


@pytest.mark.parametrize(
    ("name", "schema", "kind"),
    [
        ("order_id", None, "id"),
        ("orderId", None, "id"),
        ("userid", None, "id"),
        ("destinationEntityId", None, "id"),
        ("session_id", None, "token"),  # a credential, not a thing's id
        ("access_token", None, "token"),
        ("api_key", None, "token"),
        ("user_email_address", None, "email"),
        ("remind_at", None, "date"),
        ("start_date", None, "date"),
        ("delivery_time", None, "date"),  # a point in time: "3 PM tomorrow" needs today's date
        ("at", {"type": "string", "format": "time"}, "time"),
        ("when", {"type": "string", "format": "date-time"}, "date"),
        ("day", {"type": "string", "description": "Departure date. Format: YYYY-MM-DD"}, "date"),
        ("homepage", {"type": "string", "format": "uri"}, "url"),
        ("file_name", None, "path"),
        ("latitude", None, "coordinates"),
        ("amount", {"type": "number"}, "number"),
        ("count", {"type": "integer"}, "number"),
        ("weight_kg", {"type": "float"}, "number"),  # a source's own type names count too
        ("city", None, None),
        ("message", {"type": "string"}, None),
        ("enabled", {"type": "boolean"}, None),
        ("key", None, None),  # a dictionary key, a music key: no kind
        ("order_number", None, None),  # "number" only holds: the head word is "order"
    ],
)
def test_a_parameter_kind_comes_from_its_format_its_head_word_or_its_type(
    name: str, schema: dict[str, Any] | None, kind: str | None
) -> None:
    assert parameter_shape(name, schema).kind == kind


@pytest.mark.parametrize(
    ("text", "kinds"),
    [
        ("details of order ORD-1193", {"id"}),
        ("what did user 84119 post", {"id", "number"}),
        ("ticket " + "#" + "42 is still open", {"id", "number"}),  # (written apart: no issue number here)
        ("send the minutes to bob@example.com", {"email"}),
        ("summarise https://example.com/report", {"url"}),
        ("move final_report.pdf to temp", {"path"}),
        ("open ~/notes/today.md", {"path"}),
        ("fly out on August 15, 2024", {"date"}),
        ("the report of 2024-08-15", {"date"}),
        ("what is near 40.7128, -74.0060", {"coordinates"}),
        ("remind me tomorrow at 3 PM", {"time"}),
        ("use token eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9abc1", {"token", "id"}),
        # a relative or partial date is no date; a year is no quantity; an amount and a measure are numbers
        ("call mom on the 25th of December", set()),
        ("population of Los Angeles in 2020", set()),
        ("sell 1,500 shares of Apple", {"number"}),
        ("log my 30-minute cardio session", {"number"}),
        ("a loan of $250,000 at 4.5%", {"number"}),
    ],
)
def test_request_values_see_the_literals_a_user_typed(text: str, kinds: set[str]) -> None:
    assert request_values(text).kinds == kinds


def test_numbers_inside_dates_times_and_codes_are_no_quantities() -> None:
    values = request_values("order ORD-1193 of 2024-08-15 at 7:30 PM, version v2")
    assert "number" not in values.kinds
    assert request_values("a principal of 5000 for order ORD-7").placed == (("number", 3), ("id", 5))


def test_a_number_supplies_a_number_parameter_only_where_the_request_names_the_quantity() -> None:
    principal = parameter_shape("principal_amount", {"type": "number"})
    named = request_values("the interest on a principal of 5000 at 3% for 2 years")
    unnamed = request_values("convert it to EUR, then add 5")
    assert supplies(named, principal, "named")
    assert not supplies(unnamed, principal, "named")
    assert supplies(unnamed, principal, "any")
    assert not supplies(named, principal, "off")
    # the name's words count in the plural too, a few words either side of the number
    steps = parameter_shape("daily_steps", {"type": "integer"})
    assert supplies(request_values("I walk around 10,000 steps a day"), steps, "named")
    assert not supplies(request_values("I walk a lot, 10,000 is my goal for the whole month"), steps)


def test_an_enum_member_named_as_words_supplies_the_parameter() -> None:
    cuisine = parameter_shape(
        "cuisine_type", {"type": "string", "enum": ["italian", "thai", "middle_eastern"]}
    )
    assert supplies(request_values("I'm in the mood for some Italian food"), cuisine)
    assert supplies(request_values("any Middle Eastern place?"), cuisine)
    assert not supplies(request_values("find a nice place nearby"), cuisine)
    assert not supplies(request_values("a Thailand trip"), cuisine)  # whole words only


def test_a_literal_the_pattern_matches_in_full_supplies_the_parameter() -> None:
    currency = parameter_shape("currency", {"type": "string", "pattern": "^[A-Z]{3}$"})
    assert supplies(request_values("convert 100 USD to euros"), currency)
    assert not supplies(request_values("convert 100 dollars to euros"), currency)
    quoted = parameter_shape("sku", {"type": "string", "pattern": "^SKU-[0-9]+ [a-z]+$"})
    assert supplies(request_values('restock "SKU-42 blue" today'), quoted)
    # a pattern that any word matches tells nothing: ignored
    assert parameter_shape("label", {"type": "string", "pattern": ".*"}).pattern is None
    assert parameter_shape("label", {"type": "string", "pattern": "(unclosed"}).pattern is None


def test_an_id_supplies_the_id_parameter_its_words_name() -> None:
    order = parameter_shape("order_id", {"type": "string"})
    assert supplies(request_values("details of order ORD-1193"), order)
    assert supplies(request_values("cancel my pending order with id 12446"), order)
    assert not supplies(request_values("details of my last order"), order)
    # the user's id is no order's
    assert not supplies(request_values("I am USR001: cancel the order I placed"), order)
    assert supplies(request_values("look up a8f3c2e1-0b7d-4c55-9e2f-1d2c3b4a5e6f"), parameter_shape("id"))


def test_kinds_other_than_numbers_and_ids_need_only_a_literal_of_their_kind() -> None:
    date = parameter_shape("end_date", {"type": "string"})
    assert supplies(request_values("prices until December 31st, 2020"), date)
    assert not supplies(request_values("prices until next Monday"), date)
    assert not supplies(request_values("remind me at 3 PM tomorrow"), parameter_shape("time"))


def test_a_tool_that_takes_the_value_itself_converts_or_checks_it() -> None:
    converter = {"type": "object", "properties": {"value": {"type": "number"}, "to_unit": {"type": "string"}}}
    validator = {"type": "object", "properties": {"email": {"type": "string"}}}
    finder = {"type": "object", "properties": {"name": {"type": "string"}}}
    weight = parameter_shape("weight_kg", {"type": "number"})
    to = parameter_shape("recipient", {"type": "string", "format": "email"})
    assert takes_value(converter, "weight_kg", weight)
    assert takes_value(validator, "recipient", to)
    assert not takes_value(validator, "weight_kg", weight)
    assert not takes_value(None, "recipient", to)
    # a file search takes the name a delete tool's ``file_name`` holds: it checks the file exists
    file_name = parameter_shape("file_name", {"type": "string"})
    assert takes_value(finder, "file_name", file_name)
    assert not takes_value(finder, "file_path", parameter_shape("file_path", {"type": "string"}))
