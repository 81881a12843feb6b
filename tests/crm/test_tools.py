"""Every CRM tool against the fake, its schema checked first as the tool router does."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from jsonschema import Draft202012Validator, FormatChecker
from jsonschema.exceptions import ValidationError

from controlcenter.crm.tools import NOT_CONNECTED, OPERATION_IDS, crm_tools
from controlcenter.crm.tools.conversations import page_of_messages
from controlcenter.crm.tools.emails import templates_of
from controlcenter.tools.base import Tool, ToolContext, ToolError
from tests.crm.conftest import Location
from tests.fakes.crm import FakeCrm

TOOLS = {tool.name: tool for tool in crm_tools()}


async def run(tool_name: str, args: dict[str, Any], location: Location | None) -> Any:
    """Validate like the router (JSON Schema 2020-12, formats), then call the handler."""
    tool = TOOLS[tool_name]
    Draft202012Validator(tool.input_schema, format_checker=FormatChecker()).validate(args)
    ctx = ToolContext(user_id="u1", crm=location.client if location else None)
    return await tool.handler(args, ctx)


# -- the catalogue itself --------------------------------------------------------------------


def test_about_thirty_uniquely_and_validly_named_tools() -> None:
    tools = crm_tools()
    names = [tool.name for tool in tools]
    assert 28 <= len(tools) <= 40
    assert len(set(names)) == len(names)
    for name in names:
        assert re.fullmatch(r"[A-Za-z0-9_-]{1,64}", name), name
    for expected in (
        "contacts_get-contacts",
        "contacts_get-contact",
        "contacts_create-contact",
        "contacts_update-contact",
        "contacts_upsert-contact",
        "contacts_add-tags",
        "contacts_remove-tags",
        "contacts_get-all-tasks",
        "conversations_search-conversation",
        "conversations_get-messages",
        "conversations_send-a-new-message",
        "opportunities_search-opportunity",
        "opportunities_get-opportunity",
        "opportunities_update-opportunity",
        "opportunities_get-pipelines",
        "calendars_get-calendar-events",
        "calendars_get-appointment-notes",
        "locations_get-location",
        "locations_get-custom-fields",
        "emails_fetch-template",
        "payments_get-order-by-id",
        "payments_list-transactions",
    ):
        assert expected in names


@pytest.mark.parametrize("tool", crm_tools(), ids=lambda tool: tool.name)
def test_schema_is_a_closed_valid_json_schema(tool: Tool) -> None:
    Draft202012Validator.check_schema(tool.input_schema)
    assert tool.input_schema["type"] == "object"
    assert tool.input_schema["additionalProperties"] is False
    assert set(tool.input_schema["required"]) <= set(tool.input_schema["properties"])
    assert "locationId" not in tool.input_schema["properties"]
    assert len(tool.description) > 40


@pytest.mark.parametrize("tool", crm_tools(), ids=lambda tool: tool.name)
async def test_without_a_linked_location_every_tool_says_so(tool: Tool) -> None:
    with pytest.raises(ToolError) as caught:
        await tool.handler({}, ToolContext(user_id="u1", crm=None))
    assert str(caught.value) == NOT_CONNECTED
    assert "not connected" in NOT_CONNECTED and "location" in NOT_CONNECTED


def test_a_location_argument_is_refused_by_the_schema() -> None:
    schema = TOOLS["contacts_get-contacts"].input_schema
    with pytest.raises(ValidationError):
        Draft202012Validator(schema).validate({"locationId": "someone-else"})


# -- contacts --------------------------------------------------------------------------------


@pytest.fixture
def dana(fake_crm: FakeCrm, location: Location) -> dict[str, Any]:
    return fake_crm.add_contact(
        location.id,
        firstName="Dana",
        lastName="Whitfield",
        email="dana@northpier.example",
        phone="+15550100001",
        companyName="North Pier Logistics",
        tags=["tenant-rep"],
    )


async def test_get_contacts_searches_own_location_only(
    fake_crm: FakeCrm, location: Location, dana: dict[str, Any]
) -> None:
    other = fake_crm.add_location()
    fake_crm.add_contact(other["id"], firstName="Dana", email="dana@else.example")
    fake_crm.add_contact(location.id, firstName="Omar", email="omar@x.example")
    found = await run("contacts_get-contacts", {"query": "dana"}, location)
    assert [c["id"] for c in found["contacts"]] == [dana["id"]]
    assert found["total"] == 1
    everyone = await run("contacts_get-contacts", {"limit": 1}, location)
    assert len(everyone["contacts"]) == 1 and everyone["total"] == 2


async def test_get_contact(location: Location, dana: dict[str, Any]) -> None:
    answer = await run("contacts_get-contact", {"contactId": dana["id"]}, location)
    assert answer["contact"]["email"] == "dana@northpier.example"
    with pytest.raises(ToolError, match=r"^Contact not found\.$"):
        await run("contacts_get-contact", {"contactId": "missing0000"}, location)


async def test_create_contact_and_duplicate_refused(
    fake_crm: FakeCrm, location: Location, dana: dict[str, Any]
) -> None:
    answer = await run(
        "contacts_create-contact", {"firstName": "Lena", "email": "lena@x.example"}, location
    )
    assert answer["contact"]["locationId"] == location.id
    assert len(fake_crm.contacts(location.id)) == 2
    with pytest.raises(ToolError, match="does not allow duplicated contacts"):
        await run("contacts_create-contact", {"email": "dana@northpier.example"}, location)
    with pytest.raises(ToolError, match="needs an e-mail or a phone"):
        await run("contacts_create-contact", {"firstName": "Nobody"}, location)
    with pytest.raises(ToolError, match="needs an e-mail or a phone"):
        await run("contacts_upsert-contact", {"city": "Oakland"}, location)
    assert len(fake_crm.contacts(location.id)) == 2


async def test_update_contact(location: Location, dana: dict[str, Any]) -> None:
    answer = await run(
        "contacts_update-contact", {"contactId": dana["id"], "city": "Oakland"}, location
    )
    assert answer["contact"]["city"] == "Oakland"
    assert answer["contact"]["tags"] == ["tenant-rep"]
    with pytest.raises(ValidationError):  # UpdateContactDto does not declare companyName
        await run(
            "contacts_update-contact", {"contactId": dana["id"], "companyName": "X"}, location
        )
    with pytest.raises(ToolError, match="The CRM refused the request: email must be an email"):
        await run("contacts_update-contact", {"contactId": dana["id"], "email": "x@"}, location)


async def test_upsert_contact(fake_crm: FakeCrm, location: Location, dana: dict[str, Any]) -> None:
    answer = await run(
        "contacts_upsert-contact",
        {"email": "DANA@northpier.example", "city": "Oakland"},
        location,
    )
    assert answer["new"] is False and answer["contact"]["id"] == dana["id"]
    created = await run("contacts_upsert-contact", {"phone": "+15550109999"}, location)
    assert created["new"] is True
    assert len(fake_crm.contacts(location.id)) == 2


async def test_add_and_remove_tags(location: Location, dana: dict[str, Any]) -> None:
    added = await run("contacts_add-tags", {"contactId": dana["id"], "tags": ["hot"]}, location)
    assert added["tags"] == ["tenant-rep", "hot"]
    removed = await run(
        "contacts_remove-tags", {"contactId": dana["id"], "tags": ["tenant-rep"]}, location
    )
    assert removed["tags"] == ["hot"]
    with pytest.raises(ValidationError):
        await run("contacts_add-tags", {"contactId": dana["id"], "tags": []}, location)
    with pytest.raises(ToolError, match="Contact not found"):
        await run("contacts_remove-tags", {"contactId": "gone", "tags": ["x"]}, location)


async def test_tasks(fake_crm: FakeCrm, location: Location, dana: dict[str, Any]) -> None:
    fake_crm.add_task(dana["id"], title="Send shortlist")
    due = (datetime.now(UTC) + timedelta(days=1)).isoformat()
    created = await run(
        "contacts_create-task", {"contactId": dana["id"], "title": "Call", "dueDate": due}, location
    )
    assert created["task"]["completed"] is False
    listed = await run("contacts_get-all-tasks", {"contactId": dana["id"]}, location)
    assert {t["title"] for t in listed["tasks"]} == {"Send shortlist", "Call"}
    with pytest.raises(ToolError, match="dueDate must be an ISO 8601 date-time"):
        await run(
            "contacts_create-task",
            {"contactId": dana["id"], "title": "x", "dueDate": "tomorrow"},
            location,
        )


async def test_notes(location: Location, dana: dict[str, Any]) -> None:
    await run("contacts_create-note", {"contactId": dana["id"], "body": "Needs 6 docks"}, location)
    notes = await run("contacts_get-all-notes", {"contactId": dana["id"]}, location)
    assert [n["body"] for n in notes["notes"]] == ["Needs 6 docks"]
    with pytest.raises(ToolError, match="Contact not found"):
        await run("contacts_get-all-notes", {"contactId": "nobody"}, location)


# -- conversations ---------------------------------------------------------------------------


async def test_conversations(fake_crm: FakeCrm, location: Location, dana: dict[str, Any]) -> None:
    conversation = fake_crm.add_conversation(dana["id"])
    fake_crm.add_message(conversation["id"], "Is the dock height 4 ft?")
    found = await run("conversations_search-conversation", {"contactId": dana["id"]}, location)
    assert [c["id"] for c in found["conversations"]] == [conversation["id"]]
    messages = await run(
        "conversations_get-messages", {"conversationId": conversation["id"]}, location
    )
    assert messages["messages"][0]["body"] == "Is the dock height 4 ft?"
    assert messages["nextPage"] is False and messages["lastMessageId"]
    with pytest.raises(ToolError, match="Conversation not found"):
        await run("conversations_get-messages", {"conversationId": "nope"}, location)


async def test_send_a_new_message(
    fake_crm: FakeCrm, location: Location, dana: dict[str, Any]
) -> None:
    sent = await run(
        "conversations_send-a-new-message",
        {"type": "SMS", "contactId": dana["id"], "message": "Tour confirmed for 2pm"},
        location,
    )
    assert sent["messageId"] and sent["conversationId"]
    bodies = [m["body"] for m in fake_crm.state.messages.values()]
    assert bodies == ["Tour confirmed for 2pm"]
    [call] = fake_crm.calls_to("POST", "/conversations/messages")
    assert call.body["subType"] == "SMS" and call.body["status"] == "pending"
    with pytest.raises(ToolError, match="Give the text to send"):
        await run(
            "conversations_send-a-new-message", {"type": "SMS", "contactId": dana["id"]}, location
        )
    with pytest.raises(ToolError, match="Give a calendarId"):
        await run("calendars_get-calendar-events", {}, location)
    assert len(fake_crm.calls_to("POST", "/conversations/messages")) == 1
    no_phone = fake_crm.add_contact(location.id, email="nophone@x.example")
    with pytest.raises(ToolError, match="Missing phone number"):
        await run(
            "conversations_send-a-new-message",
            {"type": "SMS", "contactId": no_phone["id"], "message": "hi"},
            location,
        )


# -- opportunities ---------------------------------------------------------------------------


async def test_opportunities(fake_crm: FakeCrm, location: Location, dana: dict[str, Any]) -> None:
    pipeline = fake_crm.add_pipeline(location.id, "Leasing", ["New", "Touring", "Signed"])
    deal = fake_crm.add_opportunity(pipeline["id"], dana["id"], "North Pier lease", monetaryValue=9)
    pipelines = await run("opportunities_get-pipelines", {}, location)
    assert [s["name"] for s in pipelines["pipelines"][0]["stages"]] == ["New", "Touring", "Signed"]
    found = await run("opportunities_search-opportunity", {"query": "pier"}, location)
    assert [o["id"] for o in found["opportunities"]] == [deal["id"]]
    one = await run("opportunities_get-opportunity", {"opportunityId": deal["id"]}, location)
    assert one["opportunity"]["name"] == "North Pier lease"
    signed = pipeline["stages"][2]["id"]
    updated = await run(
        "opportunities_update-opportunity",
        {"opportunityId": deal["id"], "pipelineStageId": signed, "status": "won"},
        location,
    )
    assert updated["opportunity"]["status"] == "won"
    assert fake_crm.state.opportunities[deal["id"]]["pipelineStageId"] == signed
    won = await run("opportunities_search-opportunity", {"status": "won"}, location)
    assert len(won["opportunities"]) == 1
    with pytest.raises(ToolError, match="Pipeline stage not found"):
        await run(
            "opportunities_update-opportunity",
            {"opportunityId": deal["id"], "pipelineStageId": "nostage"},
            location,
        )
    with pytest.raises(ToolError, match="Opportunity not found"):
        await run("opportunities_get-opportunity", {"opportunityId": "nothing"}, location)


async def test_create_opportunity(
    fake_crm: FakeCrm, location: Location, dana: dict[str, Any]
) -> None:
    pipeline = fake_crm.add_pipeline(location.id, "Sales", ["Lead"])
    created = await run(
        "opportunities_create-opportunity",
        {"pipelineId": pipeline["id"], "name": "Deal", "contactId": dana["id"]},
        location,
    )
    assert created["opportunity"]["status"] == "open"
    with pytest.raises(ToolError, match="Pipeline not found"):
        await run(
            "opportunities_create-opportunity",
            {"pipelineId": "nopipe", "name": "Deal", "contactId": dana["id"]},
            location,
        )


# -- calendars -------------------------------------------------------------------------------


async def test_calendar_events_and_notes(
    fake_crm: FakeCrm, location: Location, dana: dict[str, Any]
) -> None:
    calendar = fake_crm.add_calendar(location.id, "Tours")
    start = (datetime.now(UTC) + timedelta(days=1)).replace(microsecond=0)
    event = fake_crm.add_event(calendar["id"], dana["id"], start, title="Tour")
    fake_crm.add_event(calendar["id"], dana["id"], start + timedelta(days=30), title="Later")
    fake_crm.add_appointment_note(event["id"], "Bring floor plans")
    calendars = await run("calendars_get-calendars", {}, location)
    assert [c["name"] for c in calendars["calendars"]] == ["Tours"]
    events = await run("calendars_get-calendar-events", {"calendarId": calendar["id"]}, location)
    assert [e["title"] for e in events["events"]] == ["Tour"]  # default: the next 7 days
    notes = await run("calendars_get-appointment-notes", {"appointmentId": event["id"]}, location)
    assert [n["body"] for n in notes["notes"]] == ["Bring floor plans"]
    assert notes["hasMore"] is False
    with pytest.raises(ToolError, match="endTime must be after startTime"):
        await run(
            "calendars_get-calendar-events",
            {
                "calendarId": calendar["id"],
                "startTime": "2026-05-02T00:00:00Z",
                "endTime": "2026-05-01T00:00:00Z",
            },
            location,
        )
    with pytest.raises(ToolError, match="Appointment not found"):
        await run("calendars_get-appointment-notes", {"appointmentId": "none"}, location)


async def test_free_slots(fake_crm: FakeCrm, location: Location, dana: dict[str, Any]) -> None:
    calendar = fake_crm.add_calendar(location.id, "Tours")
    monday = datetime(2030, 1, 7, tzinfo=UTC)  # a Monday
    fake_crm.add_event(calendar["id"], dana["id"], monday.replace(hour=10))
    answer = await run(
        "calendars_get-free-slots",
        {"calendarId": calendar["id"], "startDate": "2030-01-07", "endDate": "2030-01-07"},
        location,
    )
    slots = answer["2030-01-07"]["slots"]
    assert len(slots) == 7 and not any("T10:00" in slot for slot in slots)
    with pytest.raises(ToolError, match="at most 31 days"):
        await run(
            "calendars_get-free-slots",
            {"calendarId": calendar["id"], "startDate": "2030-01-01", "endDate": "2030-03-01"},
            location,
        )
    with pytest.raises(ToolError, match="Calendar not found"):
        await run(
            "calendars_get-free-slots",
            {"calendarId": "nocal", "startDate": "2030-01-07", "endDate": "2030-01-07"},
            location,
        )


# -- locations, e-mail templates, payments -------------------------------------------------------


async def test_location_custom_fields_and_tags(
    fake_crm: FakeCrm, location: Location, dana: dict[str, Any]
) -> None:
    fake_crm.add_custom_field(location.id, "Square footage needed", "NUMERICAL")
    answer = await run("locations_get-location", {}, location)
    assert answer["location"]["id"] == location.id
    fields = await run("locations_get-custom-fields", {}, location)
    assert fields["customFields"][0]["fieldKey"] == "contact.square_footage_needed"
    tags = await run("locations_get-tags", {}, location)
    assert [t["name"] for t in tags["tags"]] == ["tenant-rep"]


async def test_fetch_templates(fake_crm: FakeCrm, location: Location) -> None:
    fake_crm.add_template(location.id, "Listing announcement")
    fake_crm.add_template(location.id, "Monthly newsletter")
    found = await run("emails_fetch-template", {"search": "listing"}, location)
    assert [t["name"] for t in found["templates"]] == ["Listing announcement"]
    nothing = await run("emails_fetch-template", {"search": "no such"}, location)
    assert nothing == {"templates": []}


async def test_payments(fake_crm: FakeCrm, location: Location, dana: dict[str, Any]) -> None:
    order = fake_crm.add_order(location.id, dana["id"], 1500.0)
    transaction = fake_crm.add_transaction(location.id, dana["id"], 1500.0)
    orders = await run("payments_list-orders", {"contactId": dana["id"]}, location)
    assert orders["totalCount"] == 1
    one = await run("payments_get-order-by-id", {"orderId": order["_id"]}, location)
    assert one["amount"] == 1500.0
    listed = await run("payments_list-transactions", {}, location)
    assert [t["_id"] for t in listed["data"]] == [transaction["_id"]]
    got = await run(
        "payments_get-transaction-by-id", {"transactionId": transaction["_id"]}, location
    )
    assert got["status"] == "succeeded"
    with pytest.raises(ToolError, match="Order not found"):
        await run("payments_get-order-by-id", {"orderId": "noorder"}, location)


# -- failures the model must be able to act on -------------------------------------------------


async def test_rate_limit_becomes_an_actionable_error(
    fake_crm: FakeCrm, location: Location
) -> None:
    fake_crm.rate_limit(10, retry_after="0")
    with pytest.raises(ToolError, match="CRM rate limit reached; try again"):
        await run("contacts_get-contacts", {}, location)


async def test_outage_becomes_an_actionable_error(fake_crm: FakeCrm, location: Location) -> None:
    fake_crm.outage(502)
    with pytest.raises(ToolError, match="not reachable right now"):
        await run("opportunities_get-pipelines", {}, location)


async def test_another_locations_records_are_unreachable(
    fake_crm: FakeCrm, location: Location
) -> None:
    other = fake_crm.add_location()
    theirs = fake_crm.add_contact(other["id"], email="private@other.example")
    with pytest.raises(ToolError, match="not in this user's CRM account"):
        await run("contacts_get-contact", {"contactId": theirs["id"]}, location)
    with pytest.raises(ToolError, match="not in this user's CRM account"):
        await run(
            "contacts_update-contact", {"contactId": theirs["id"], "firstName": "X"}, location
        )
    stored = fake_crm.contact(theirs["id"])
    assert stored is not None and stored["firstName"] is None


def test_answers_in_another_wrapper_reach_the_model_in_the_described_shape() -> None:
    page = {"lastMessageId": "m2", "nextPage": False, "messages": [{"id": "m1"}]}
    assert page_of_messages({"messages": page}) == page
    assert page_of_messages(page) == page
    one = {"id": "t1", "name": "Listing"}
    assert templates_of(one) == [one]
    assert templates_of([one]) == [one]
    assert templates_of({"builders": [one], "total": [{"total": 1}]}) == [one]
    assert templates_of({}) == [] and templates_of(None) == []


def test_no_schema_has_a_top_level_combinator() -> None:
    for tool in crm_tools():
        assert not {"anyOf", "oneOf", "allOf", "not"} & set(tool.input_schema), tool.name


def test_every_tool_cites_its_highlevel_operation() -> None:
    assert set(OPERATION_IDS) == set(TOOLS)
    assert OPERATION_IDS["contacts_get-contacts"] == "search-contacts-advanced"
    assert OPERATION_IDS["calendars_get-free-slots"] == "get-slots"
