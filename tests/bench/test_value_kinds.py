"""The lab's kinds of values (``bench/value_kinds.py``): what a parameter takes (from its schema), and
which kinds a request holds."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from value_kinds import parameter_kind, request_kinds


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
        ("remind_at", None, "datetime"),
        ("start_date", None, "datetime"),
        ("when", {"type": "string", "format": "date-time"}, "datetime"),
        ("day", {"type": "string", "description": "Departure date. Format: YYYY-MM-DD"}, "datetime"),
        ("homepage", {"type": "string", "format": "uri"}, "url"),
        ("file_name", None, "path"),
        ("latitude", None, "coordinates"),
        ("city", None, None),
        ("message", {"type": "string"}, None),
        ("key", None, None),  # a dictionary key, a music key: no kind
        ("order_number", None, None),  # "number" only holds: the head word is "order"
    ],
)
def test_a_parameter_kind_comes_from_its_format_or_its_head_word(
    name: str, schema: dict[str, object] | None, kind: str | None
) -> None:
    assert parameter_kind(name, schema) == kind


@pytest.mark.parametrize(
    ("text", "kinds"),
    [
        ("details of order ORD-1193", {"id"}),
        ("what did user 84119 post", {"id"}),
        ("ticket " + "#" + "42 is still open", {"id"}),  # (written apart: no issue number in the text)
        ("send the minutes to bob@example.com", {"email"}),
        ("summarise https://example.com/report", {"url"}),
        ("move final_report.pdf to temp", {"path"}),
        ("open ~/notes/today.md", {"path"}),
        ("fly out on August 15, 2024", {"datetime"}),
        ("the report of 2024-08-15", {"datetime"}),
        ("what is near 40.7128, -74.0060", {"coordinates"}),
        ("use token eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9abc1", {"token", "id"}),
        # no value the walk could skip a producer for: relative or partial dates, years, amounts, measures
        ("remind me tomorrow at 3 PM", set()),
        ("call mom at 18:00 on the 25th of December", set()),
        ("population of Los Angeles in 2020", set()),
        ("sell 1,500 shares of Apple", set()),
        ("log my 30-minute cardio session", set()),
        ("a 3-bedroom place in the 12th district", set()),
    ],
)
def test_request_kinds_see_only_values_a_user_typed_whole(text: str, kinds: set[str]) -> None:
    assert request_kinds(text) == kinds
