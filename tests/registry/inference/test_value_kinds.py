"""Parameter-value producer edges on small hand-made fleets: typed inputs linked to the tool making them."""

from __future__ import annotations

from tests.registry.inference.inference_helpers import tool
from toolweave.inference import infer_edges, propose_edges, rule_of
from toolweave.inference.rules.value_kinds import param_kind
from toolweave.records import DependencyEdge, EdgeKind, ToolRecord


def producer_edges(tools: list[ToolRecord]) -> dict[tuple[str, str], DependencyEdge]:
    return {(e.tool, e.depends_on): e for e in propose_edges(tools) if rule_of(e) == "producer_rule"}


def test_a_timestamp_input_links_to_the_tool_that_makes_timestamps() -> None:
    tools = [
        tool("n", "schedule_reminder", "Remind the user of something.", {"remind_at": "", "note": ""}),
        tool(
            "n", "make_unix_timestamp", "Turn a date into seconds.", {"date": ""}, outputs={"timestamp": ""}
        ),
        tool("n", "get_weather", "Weather for a city.", {"city": ""}),
    ]
    got = producer_edges(tools)
    edge = got[("n__schedule_reminder", "n__make_unix_timestamp")]
    assert edge.kind == EdgeKind.PARAMETER_DIRECTLY_DEPENDS_ON and edge.parameter_name == "remind_at"
    assert "timestamp" in edge.reason and edge.origin == "inferred"
    assert len(got) == 1  # the weather tool makes no timestamp


def test_coordinates_emails_urls_and_file_paths() -> None:
    tools = [
        tool(
            "m",
            "geocode_address",
            "Returns the latitude and longitude of an address.",
            {"address": ""},
            outputs={"latitude": "", "longitude": ""},
        ),
        tool("m", "find_nearby_parks", "Parks near a point.", {"latitude": "", "longitude": ""}),
        tool("m", "get_user_email", "The signed-in user's email address.", {}),
        tool("m", "subscribe_newsletter", "Subscribe to the newsletter.", {"email_address": ""}),
        # whose email: a recipient's is not the signed-in user's
        tool("m", "forward_message", "Forward a message.", {"recipient_email": ""}),
        tool("m", "create_link", "A public link to a document.", {"document_id": ""}, outputs={"url": ""}),
        tool("m", "shorten", "Shorten a link.", {"url": ""}),
        tool(
            "m",
            "download_file",
            "Downloads a file and returns the local file path.",
            {"source": ""},
            outputs={"file_path": ""},
        ),
        tool("m", "print_document", "Print a file.", {"file_path": ""}),
    ]
    got = producer_edges(tools)
    assert ("m__find_nearby_parks", "m__geocode_address") in got
    assert ("m__subscribe_newsletter", "m__get_user_email") in got
    assert ("m__forward_message", "m__get_user_email") not in got
    assert ("m__shorten", "m__create_link") in got
    assert ("m__print_document", "m__download_file") in got
    # the one-per-pair merge keeps both coordinates in one edge
    merged = {(e.tool, e.depends_on): e for e in infer_edges(tools)}
    assert merged[("m__find_nearby_parks", "m__geocode_address")].parameter_name == "latitude,longitude"


def test_no_producer_when_the_evidence_is_weak_or_ambiguous() -> None:
    tools = [
        # an output field alone does not make a producer: a search that returns a contact email
        tool("w", "find_mentor", "Find a mentor.", {"field": ""}, outputs={"contact_email": ""}),
        # a producer of qualified values feeds only inputs that say so (a stream's URL is no logo URL)
        tool("w", "get_live_stream_url", "The URL of a live stream.", {"channel": ""}),
        tool("w", "create_media_kit", "Make a media kit.", {"logo_url": ""}),
        # a graph path is not a file path
        tool("w", "find_eulerian_path", "An Eulerian path of a graph.", {"graph": ""}),
        tool("w", "resize_image", "Resize an image.", {"image_path": ""}),
        # a tool that takes the kind transforms it; a validator checks it: neither produces it
        tool("w", "normalize_email", "Lower-case an email.", {"email": ""}, outputs={"email": ""}),
        tool("w", "validate_email", "Check an email address.", {"email": ""}),
        tool("w", "register", "Sign up.", {"email": ""}),
    ]
    assert producer_edges(tools) == {}


def test_many_equally_good_producers_name_none() -> None:
    makers = [
        tool(f"s{i}", "get_timestamp", "Returns a timestamp.", {}, outputs={"timestamp": ""})
        for i in range(3)
    ]
    needs = tool("z", "log_event", "Log an event.", {"timestamp": ""})
    assert producer_edges([*makers, needs]) == {}
    assert ("z__log_event", "s0__get_timestamp") in producer_edges([makers[0], needs])


def kind_name(name: str, fmt: str | None = None) -> str | None:
    kind = param_kind(name, fmt)
    return kind.name if kind is not None else None


def test_parameter_kinds_from_names_and_formats() -> None:
    assert kind_name("remind_at") == "timestamp"
    assert kind_name("when", "date-time") == "timestamp"
    assert kind_name("contact", "email") == "email"
    assert kind_name("user_email_address") == "email"
    assert param_kind("email_notifications") is None
    assert kind_name("lng") == "coordinates"
    assert param_kind("status") is None and param_kind("at") is None
