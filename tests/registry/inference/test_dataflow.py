"""The data-flow rule on hand-made fleets: an input is fed by a tool whose output schema returns it."""

from __future__ import annotations

from tests.registry.inference.inference_helpers import obj, rec
from toolweave.inference import infer_edges, propose_edges, rule_of
from toolweave.inference.fields import input_fields, output_fields
from toolweave.inference.rules.dataflow import MAX_PRODUCERS
from toolweave.records import DependencyEdge, ToolRecord

S = {"type": "string"}
N = {"type": "number"}


def flows(tools: list[ToolRecord]) -> dict[tuple[str, str], DependencyEdge]:
    """The data-flow rule's proposals, by (tool, depends_on)."""
    return {(e.tool, e.depends_on): e for e in propose_edges(tools) if rule_of(e).startswith("dataflow_rule")}


def test_an_input_is_fed_by_a_search_that_returns_it_not_by_an_act_that_repeats_it() -> None:
    tools = [
        rec("h", "search_hotels", {"city": S}, obj(hotel_name=S, price_per_night=N, city=S)),
        rec(
            "h", "reserve_hotel", {"hotel_name": S, "nights": N}, obj(hotel_name=S, booking_id=S, room_type=S)
        ),
        rec("h", "upgrade_room", {"room_type": S}),
        rec("h", "cancel_booking", {"booking_id": S}, obj(status=S)),
        rec("h", "rate_hotel", {"hotel_name": S, "stars": N}, obj(hotel_name=S, average=N)),
        rec("h", "get_hotel", {"hotel_id": S}, obj(hotel_address=obj(street=S, zip_code=S), city=S)),
        rec("h", "send_letter", {"hotel_address": S, "letter": S}),
    ]
    got = flows(tools)
    assert got[("h__reserve_hotel", "h__search_hotels")].parameter_name == "hotel_name"
    assert rule_of(got[("h__reserve_hotel", "h__search_hotels")]) == "dataflow_rule/name"
    # an act's identifier is what it makes: the booking id of a reservation feeds its cancellation
    assert rule_of(got[("h__cancel_booking", "h__reserve_hotel")]) == "dataflow_rule/name-id"
    # the reservation repeats the hotel name it was given: it is no source of hotel names; and what an
    # act returns besides its identifier is a confirmation, not something found
    assert ("h__rate_hotel", "h__reserve_hotel") not in got
    assert ("h__upgrade_room", "h__reserve_hotel") not in got
    # rate_hotel takes hotel_name itself: it echoes it, it does not make it
    assert ("h__reserve_hotel", "h__rate_hotel") not in got
    # a record is not a string: the hotel's address record does not fill a one-line address
    assert ("h__send_letter", "h__get_hotel") not in got
    # a city is one word, an attribute of many records: no match by name across tools
    assert not any(e.parameter_name == "city" for e in got.values())


def test_a_shared_parameter_name_is_no_evidence_and_a_record_is_not_a_string() -> None:
    """The gateway once published git_diff after convert_time through ``target``: convert_time returns
    a ``target`` *record* (its ``$ref`` TimeResult), git_diff takes a ``target`` revision string."""
    time_result = obj(timezone=S, datetime=S, is_dst={"type": "boolean"})
    convert_time = rec(
        "time",
        "convert_time",
        {"source_timezone": S, "time": S, "target_timezone": S},
        {
            "type": "object",
            "properties": {
                "source": {"$ref": "#/$defs/TimeResult"},
                "target": {"$ref": "#/$defs/TimeResult"},
            },
            "$defs": {"TimeResult": time_result},
        },
    )
    tools = [
        convert_time,
        rec("git", "git_diff", {"repo_path": S, "target": S, "context_lines": {"type": "integer"}}),
        rec("git", "git_log", {"repo_path": S, "max_count": {"type": "integer"}}),
        rec("git", "git_status", {"repo_path": S}),
    ]
    edges = infer_edges(tools)
    assert not any({e.tool, e.depends_on} == {"git__git_diff", "time__convert_time"} for e in edges)
    # the git tools all take repo_path and none returns one: no edge among them at all
    assert not any(e.tool.startswith("git__") and e.depends_on.startswith("git__") for e in edges)


def test_rest_identifiers_the_core_of_a_qualified_name_and_nested_records() -> None:
    pet = obj(id={"type": "integer"}, name=S, category=obj(id={"type": "integer"}, name=S))
    tools = [
        rec("p", "findPetsByStatus", {"status": S}, obj(result={"type": "array", "items": pet})),
        rec("p", "getPetById", {"petId": {"type": "integer"}}, pet),
        rec("p", "listCategoryProducts", {"categoryId": {"type": "integer"}}, obj(result=S)),
        rec("f", "search_airport", {"query": S}, obj(skyId=S, entityId=S)),
        rec("f", "search_flights", {"originSkyId": S, "destinationSkyId": S, "date": S}, obj(flightId=S)),
    ]
    got = flows(tools)
    assert got[("p__getPetById", "p__findPetsByStatus")].parameter_name == "petId"  # [].id of pets
    assert got[("p__listCategoryProducts", "p__getPetById")].parameter_name == "categoryId"  # category.id
    assert set((got[("f__search_flights", "f__search_airport")].parameter_name or "").split(",")) <= {
        "originSkyId",
        "destinationSkyId",
    }
    assert ("p__findPetsByStatus", "p__getPetById") not in got  # `status` is a filter, not an output


def test_kinds_flow_from_a_tools_product_not_from_one_attribute_of_a_record() -> None:
    tools = [
        rec("m", "text_to_image", {"prompt": S}, obj(image=S)),
        rec("m", "colorize_image", {"image": S}, obj(image=S)),
        rec("m", "describe_image", {"image": S}, obj(caption=S)),
        rec("m", "translate", {"text": S, "target_language": S}, obj(translated_text=S)),
        rec("m", "search_articles", {"query": S}, obj(title=S, image=S, author=S, url=S, text=S)),
    ]
    got = flows(tools)
    assert rule_of(got[("m__describe_image", "m__text_to_image")]) == "dataflow_rule/kind-media"
    assert ("m__describe_image", "m__colorize_image") in got  # transformers chain: colorized → described
    assert rule_of(got[("m__translate", "m__describe_image")]) == "dataflow_rule/kind-text"  # caption → text
    # the article search returns records: its image is one attribute of five, not its product
    assert ("m__describe_image", "m__search_articles") not in got
    assert ("m__translate", "m__search_articles") not in got


def test_choices_filters_optional_search_criteria_and_credentials_are_never_fed() -> None:
    tools = [
        rec("s", "get_stock_price", {"ticker": S}, obj(stock_price=N)),
        rec(
            "s",
            "search_products",
            {"max_price": N, "in_stock": {"type": "boolean"}, "sort": {"type": "string", "enum": ["a", "b"]}},
            obj(result={"type": "array", "items": obj(product_id=S, price=N)}),
            required=[],
        ),
        rec(
            "s",
            "convert_currency",
            {"amount": N, "to": {"type": "string", "enum": ["USD", "EUR"]}},
            obj(value=N),
        ),
        rec("s", "list_items", {"limit": {"type": "integer"}, "page_size": {"type": "integer"}, "token": S}),
        rec("s", "login", {"user": S, "password": S}, obj(token=S)),
        rec("s", "export_report", {"max_price": N, "title": S}),
        rec("s", "list_categories", {}, obj(result={"type": "array", "items": obj(id=S, name=S)})),
        rec("s", "find_offers", {"category_id": S, "query": S}, obj(offer=S), required=["query"]),
        rec("s", "get_category_products", {"category_id": S}, obj(products=S)),
        rec("s", "delete_note", {"note_id": S}, obj(success={"type": "boolean"}, message=S)),
        rec("s", "send_message", {"message": S, "to": S}),
    ]
    got = flows(tools)
    assert (
        got[("s__convert_currency", "s__get_stock_price")].parameter_name == "amount"
    )  # a price is an amount
    assert not any(e.tool == "s__search_products" for e in got.values())  # filters and choices
    assert not any(e.tool == "s__list_items" for e in got.values())  # paging; the token is auth_rule's
    assert not any(e.tool == "s__export_report" for e in got.values())  # a maximum is the caller's bound
    # a search's optional input is one of its criteria; a required one is what it works on
    assert ("s__find_offers", "s__list_categories") not in got
    assert got[("s__get_category_products", "s__list_categories")].parameter_name == "category_id"
    assert ("s__send_message", "s__delete_note") not in got  # a deletion's message is its status


def test_a_locator_feeds_an_input_that_points_at_the_same_thing() -> None:
    tools = [
        rec("o", "push_authorization_request", {"client_id": S}, obj(request_uri=S, expires_in=N)),
        rec("o", "authorize", {"client_id": S, "request_uri": S}, required=["request_uri"]),
        rec("o", "register_client", {"redirect_uri": S}, obj(client_id=S)),
    ]
    got = flows(tools)
    assert ("o__authorize", "o__push_authorization_request") in got
    assert (
        "o__register_client",
        "o__push_authorization_request",
    ) not in got  # a request_uri is no redirect_uri


def test_a_request_body_takes_references_from_tools_not_its_own_fields() -> None:
    pet = obj(id={"type": "integer"}, name=S, photo_url=S)
    tools = [
        rec("p", "find_pets", {"tag": S}, obj(result={"type": "array", "items": pet})),
        rec("p", "place_order", {"body": obj(pet_id={"type": "integer"}, quantity={"type": "integer"})}),
        rec("p", "add_pet", {"body": obj(name=S, photo_url=S)}, pet),
    ]
    got = flows(tools)
    assert got[("p__place_order", "p__find_pets")].parameter_name == "body.pet_id"
    assert ("p__add_pet", "p__find_pets") not in got  # a new pet's name and photo are the caller's


def test_each_input_gets_a_bounded_number_of_producers_same_source_first() -> None:
    writers = [
        rec("far", f"generate_poem_{n:02d}", {"topic": S}, obj(poem=S)) for n in range(2 * MAX_PRODUCERS)
    ]
    tools = [
        *writers,
        rec("near", "generate_story", {"topic": S}, obj(story=S)),
        rec("near", "read_aloud", {"text": S}),
    ]
    producers = [e.depends_on for e in propose_edges(tools) if e.tool == "near__read_aloud"]
    assert len(producers) == MAX_PRODUCERS
    assert producers[0] == "near__generate_story"


def test_fields_read_through_refs_wrappers_arrays_and_request_bodies() -> None:
    out = {
        "type": "object",
        "properties": {"data": {"type": "array", "items": {"$ref": "#/components/schemas/Repo"}}},
        "components": {"schemas": {"Repo": obj(slug=S, owner=obj(username=S, uuid=S))}},
    }
    fields = {f.name: f for f in output_fields(out)}
    assert set(fields) >= {"slug", "owner", "owner.username", "owner.uuid"}
    assert fields["owner.uuid"].words == ("id",) and fields["owner.uuid"].owner == ("owner",)
    assert fields["owner"].type == "object"
    inputs = {f.name: f for f in input_fields({"type": "object", "properties": {"body": obj(petId=S)}})}
    assert inputs["body.petId"].words == ("pet", "id")
