"""Each inference rule on small tool sets: the edge it must propose, and the ones it must not."""

from __future__ import annotations

from tests.registry.inference.inference_helpers import tool
from toolweave.inference import infer_edges
from toolweave.records import DependencyEdge, EdgeKind, ToolRecord


def pairs(edges: list[DependencyEdge]) -> dict[tuple[str, str], DependencyEdge]:
    return {(e.tool, e.depends_on): e for e in edges}


def test_session_parameter_comes_from_the_login_of_the_same_service() -> None:
    tools = [
        tool(
            "s", "acme_user_login", "Log in to Acme with email and password.", {"email": "", "password": ""}
        ),
        tool("s", "zeta_user_login", "Log in to Zeta.", {"email": "", "password": ""}),
        tool("s", "acme_list_orders", "List the user's Acme orders.", {"session_id": "Session from login."}),
    ]
    got = pairs(infer_edges(tools))
    edge = got[("s__acme_list_orders", "s__acme_user_login")]
    assert edge.kind == EdgeKind.PARAMETER_DIRECTLY_DEPENDS_ON
    assert edge.parameter_name == "session_id"
    assert edge.origin == "inferred" and 0 < edge.confidence <= 1 and edge.reason and edge.evidence
    assert ("s__acme_list_orders", "s__zeta_user_login") not in got


def test_service_tools_without_a_session_parameter_still_need_the_login() -> None:
    tools = [
        tool("s", "login_to_gizmo", "Sign in to Gizmo.", {"email": "", "password": ""}),
        tool("s", "gizmo_play_song", "Play a song on Gizmo.", {"song": ""}),
        tool("s", "play_radio", "Play a radio station.", {"station": ""}),
    ]
    got = pairs(infer_edges(tools))
    assert got[("s__gizmo_play_song", "s__login_to_gizmo")].kind == EdgeKind.TOOL_DIRECTLY_DEPENDS_ON
    assert ("s__play_radio", "s__login_to_gizmo") not in got


def test_token_input_links_to_the_tool_whose_output_is_the_token() -> None:
    tools = [
        tool(
            "b",
            "GetUserToken",
            "Get the user token by username and password.",
            {"username": "", "password": ""},
            outputs={"token": "The token."},
        ),
        tool(
            "b",
            "RegisterAccount",
            "Register an account.",
            {"username": "", "password": "", "email": ""},
            outputs={"token": "A token for the new account."},
        ),
        tool("b", "QueryBalance", "Query the balance.", {"token": "User's token."}, outputs={"balance": ""}),
        tool("b", "CheckToken", "Check the user token.", {"token": ""}, outputs={"username": ""}),
    ]
    got = pairs(infer_edges(tools))
    assert got[("b__QueryBalance", "b__GetUserToken")].parameter_name == "token"
    assert ("b__CheckToken", "b__GetUserToken") in got
    assert ("b__QueryBalance", "b__RegisterAccount") not in got  # one producer per parameter, the best
    # a checker that happens to return a username is not where usernames come from
    assert ("b__GetUserToken", "b__CheckToken") not in got


def test_code_and_id_parameters_come_from_their_lookup_tools() -> None:
    tools = [
        tool("g", "get_region_code", "Look up the code of a region by name.", {"region_name": ""}),
        tool("g", "get_rainfall_by_region", "Rainfall for a region.", {"region_code": "", "month": ""}),
        tool("g", "list_invoices", "List the invoices of the account.", {}),
        tool("g", "pay_invoice", "Pay an invoice.", {"invoice_id": ""}),
    ]
    got = pairs(infer_edges(tools))
    e = got[("g__get_rainfall_by_region", "g__get_region_code")]
    assert (e.kind, e.parameter_name) == (EdgeKind.PARAMETER_DIRECTLY_DEPENDS_ON, "region_code")
    assert got[("g__pay_invoice", "g__list_invoices")].parameter_name == "invoice_id"


def test_validator_and_unit_conversion() -> None:
    tools = [
        tool(
            "u", "validate_phone_number", "Check that a string is a valid phone number.", {"phone_number": ""}
        ),
        tool(
            "u",
            "convert_units",
            "Convert a value to another unit of measurement.",
            {"value": "", "from_unit": "", "to_unit": ""},
        ),
        tool("u", "send_sms", "Send a text message.", {"phone_number": "", "body": ""}),
        tool("u", "plan_hike", "Plan a hike.", {"distance_km": "", "elevation_m": ""}),
    ]
    got = pairs(infer_edges(tools))
    assert got[("u__send_sms", "u__validate_phone_number")].parameter_name == "phone_number"
    conv = got[("u__plan_hike", "u__convert_units")]
    assert conv.kind == EdgeKind.PARAMETER_INDIRECTLY_DEPENDS_ON
    assert set((conv.parameter_name or "").split(",")) == {"distance_km", "elevation_m"}
    assert ("u__send_sms", "u__convert_units") not in got


def test_context_tools_supply_defaults_core_or_optional_only() -> None:
    core_date = tool("c", "get_today", "Returns the current date.", {}, kind="core")
    local_time = tool("c", "read_clock_time", "Returns the current time.", {})
    tools: list[ToolRecord] = [
        core_date,
        local_time,
        tool("c", "sales_report", "Sales for a year.", {"year": "", "region": ""}),  # both required
        tool("c", "book_table", "Book a table.", {"time": "", "party": ""}, required=["party"]),
        tool("c", "archive_logs", "Archive logs up to a time.", {"cutoff_time": ""}),  # required
    ]
    got = pairs(infer_edges(tools))
    e = got[("c__sales_report", "c__get_today")]
    assert (e.kind, e.parameter_name) == (EdgeKind.PARAMETER_INDIRECTLY_DEPENDS_ON, "year")
    assert ("c__book_table", "c__read_clock_time") in got  # optional parameter: a default helps
    assert ("c__archive_logs", "c__read_clock_time") not in got  # required, and not a core tool


def test_environment_status_pairs_and_connectivity() -> None:
    tools = [
        tool(
            "d", "get_wifi_status", "Returns the current status of the Wi-Fi connectivity.", {}, kind="core"
        ),
        tool("d", "set_wifi_status", "Turns Wi-Fi on or off.", {"on": ""}, kind="core"),
        tool("d", "get_gps_status", "Returns whether GPS is on.", {}, kind="core"),
        tool("d", "track_gps_route", "Record the route with GPS.", {}),
        tool("d", "stream_podcast", "Stream a podcast episode from the online catalogue.", {"episode": ""}),
        tool("d", "dim_screen", "Dim the device screen locally.", {"level": ""}),
    ]
    got = pairs(infer_edges(tools))
    assert got[("d__set_wifi_status", "d__get_wifi_status")].kind == EdgeKind.TOOL_INDIRECTLY_DEPENDS_ON
    assert got[("d__track_gps_route", "d__get_gps_status")].kind == EdgeKind.TOOL_DIRECTLY_DEPENDS_ON
    assert got[("d__stream_podcast", "d__get_wifi_status")].kind == EdgeKind.TOOL_DIRECTLY_DEPENDS_ON
    assert ("d__dim_screen", "d__get_wifi_status") not in got


def test_output_is_deterministic_one_edge_per_pair_and_acyclic_pairs() -> None:
    tools = [
        tool("s", "acme_user_login", "Log in to Acme.", {"email": ""}),
        tool("s", "acme_list_orders", "List orders.", {"session_id": ""}),
        tool("s", "validate_email", "Check that an email address is valid.", {"email": ""}),
    ]
    a, b = infer_edges(tools), infer_edges(list(reversed(tools)))
    assert a == b
    keys = [(e.tool, e.depends_on) for e in a]
    assert len(keys) == len(set(keys))
    assert all(e.tool != e.depends_on for e in a)


def test_validator_matches_what_the_parameter_holds_not_any_word_of_it() -> None:
    tools = [
        tool("v", "validate_email", "Checks if a string is a valid email address.", {"email": ""}),
        tool("v", "set_alerts", "Turn alerts on or off.", {"email_notifications": "", "sms": ""}),
        tool("v", "invite", "Invite someone.", {"guest_email_address": ""}),
    ]
    got = pairs(infer_edges(tools))
    assert ("v__set_alerts", "v__validate_email") not in got
    assert got[("v__invite", "v__validate_email")].parameter_name == "guest_email_address"
