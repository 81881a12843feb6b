"""Every tool of the catalogue, with every argument it takes, against the spec-checking fake:
a tool whose request drifts from HighLevel's OpenAPI description fails here."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from jsonschema import Draft202012Validator, FormatChecker

from controlcenter.crm.tools import OPERATION_IDS, crm_tools
from controlcenter.tools.base import Tool, ToolContext
from tests.crm.conftest import Location
from tests.fakes.crm import FakeCrm

TOOLS = {tool.name: tool for tool in crm_tools()}
Ids = dict[str, str]


@pytest.fixture
def ids(fake_crm: FakeCrm, location: Location) -> Ids:
    contact = fake_crm.add_contact(
        location.id, firstName="Dana", email="dana@northpier.example", phone="+15550100001"
    )
    conversation = fake_crm.add_conversation(contact["id"])
    fake_crm.add_message(conversation["id"], "Hello")
    pipeline = fake_crm.add_pipeline(location.id, "Leasing", ["New", "Touring"])
    opportunity = fake_crm.add_opportunity(pipeline["id"], contact["id"], "North Pier lease")
    calendar = fake_crm.add_calendar(location.id, "Tours")
    start = datetime.now(UTC) + timedelta(days=1)
    event = fake_crm.add_event(calendar["id"], contact["id"], start, assignedUserId="user1")
    fake_crm.add_template(location.id, "Listing announcement")
    return {
        "contact": contact["id"],
        "conversation": conversation["id"],
        "pipeline": pipeline["id"],
        "stage": pipeline["stages"][1]["id"],
        "opportunity": opportunity["id"],
        "calendar": calendar["id"],
        "event": event["id"],
        "order": fake_crm.add_order(location.id, contact["id"], 10.0)["_id"],
        "transaction": fake_crm.add_transaction(location.id, contact["id"], 10.0)["_id"],
    }


CONTACT = {
    "firstName": "Lena",
    "lastName": "Okafor",
    "name": "Lena Okafor",
    "email": "lena@okafordental.example",
    "phone": "+15550100003",
    "address1": "1 Harbor Way",
    "city": "Oakland",
    "state": "CA",
    "postalCode": "94607",
    "country": "US",
    "website": "https://okafordental.example",
    "source": "referral",
}
SOON = (datetime.now(UTC) + timedelta(days=1)).replace(microsecond=0)
LATER = SOON + timedelta(days=2)

FULL: dict[str, Callable[[Ids], dict[str, Any]]] = {
    "contacts_get-contacts": lambda i: {"query": "dana", "limit": 5},
    "contacts_get-contact": lambda i: {"contactId": i["contact"]},
    "contacts_create-contact": lambda i: {
        **CONTACT,
        "companyName": "Okafor Dental",
        "tags": ["retail"],
    },
    "contacts_update-contact": lambda i: {
        "contactId": i["contact"],
        **CONTACT,
        "email": "dana2@northpier.example",
        "phone": "+15550100009",
        "tags": ["tenant-rep"],
    },
    "contacts_upsert-contact": lambda i: {
        **CONTACT,
        "email": "dana@northpier.example",
        "phone": "+15550100001",
        "companyName": "North Pier Logistics",
        "tags": ["warehouse"],
    },
    "contacts_add-tags": lambda i: {"contactId": i["contact"], "tags": ["hot"]},
    "contacts_remove-tags": lambda i: {"contactId": i["contact"], "tags": ["hot"]},
    "contacts_get-all-tasks": lambda i: {"contactId": i["contact"]},
    "contacts_create-task": lambda i: {
        "contactId": i["contact"],
        "title": "Send shortlist",
        "body": "Three warehouses",
        "dueDate": SOON.isoformat(),
        "completed": False,
    },
    "contacts_get-all-notes": lambda i: {"contactId": i["contact"]},
    "contacts_create-note": lambda i: {"contactId": i["contact"], "body": "Needs 6 docks"},
    "conversations_search-conversation": lambda i: {
        "contactId": i["contact"],
        "query": "dana",
        "limit": 5,
    },
    "conversations_get-messages": lambda i: {"conversationId": i["conversation"], "limit": 5},
    "conversations_send-a-new-message": lambda i: {
        "type": "Email",
        "contactId": i["contact"],
        "message": "Tour confirmed",
        "subject": "Tour",
        "html": "<p>Tour confirmed</p>",
    },
    "opportunities_search-opportunity": lambda i: {
        "query": "pier",
        "pipelineId": i["pipeline"],
        "pipelineStageId": i["stage"],
        "contactId": i["contact"],
        "status": "all",
        "limit": 5,
    },
    "opportunities_get-opportunity": lambda i: {"opportunityId": i["opportunity"]},
    "opportunities_create-opportunity": lambda i: {
        "pipelineId": i["pipeline"],
        "name": "Second lease",
        "contactId": i["contact"],
        "pipelineStageId": i["stage"],
        "status": "open",
        "monetaryValue": 1200,
    },
    "opportunities_update-opportunity": lambda i: {
        "opportunityId": i["opportunity"],
        "name": "North Pier lease (signed)",
        "pipelineId": i["pipeline"],
        "pipelineStageId": i["stage"],
        "status": "won",
        "monetaryValue": 185000,
    },
    "opportunities_get-pipelines": lambda i: {},
    "calendars_get-calendars": lambda i: {},
    "calendars_get-calendar-events": lambda i: {
        "calendarId": i["calendar"],
        "userId": "user1",
        "startTime": SOON.isoformat(),
        "endTime": LATER.isoformat(),
    },
    "calendars_get-appointment-notes": lambda i: {
        "appointmentId": i["event"],
        "limit": 5,
        "offset": 0,
    },
    "calendars_get-free-slots": lambda i: {
        "calendarId": i["calendar"],
        "startDate": SOON.date().isoformat(),
        "endDate": LATER.date().isoformat(),
        "timezone": "America/Chicago",
    },
    "locations_get-location": lambda i: {},
    "locations_get-custom-fields": lambda i: {},
    "locations_get-tags": lambda i: {},
    "emails_fetch-template": lambda i: {"search": "listing", "limit": 5, "offset": 0},
    "payments_list-orders": lambda i: {
        "contactId": i["contact"],
        "status": "completed",
        "limit": 5,
        "offset": 0,
    },
    "payments_get-order-by-id": lambda i: {"orderId": i["order"]},
    "payments_list-transactions": lambda i: {"contactId": i["contact"], "limit": 5, "offset": 0},
    "payments_get-transaction-by-id": lambda i: {"transactionId": i["transaction"]},
}


def test_every_tool_is_run_with_every_argument_it_takes() -> None:
    assert set(FULL) == set(TOOLS)
    sample = {k: "x" for k in ("contact", "conversation", "pipeline", "stage", "opportunity")}
    sample |= {k: "x" for k in ("calendar", "event", "order", "transaction")}
    for name, tool in TOOLS.items():
        assert set(FULL[name](sample)) == set(tool.input_schema["properties"]), name


@pytest.mark.parametrize("tool", list(TOOLS.values()), ids=lambda tool: tool.name)
async def test_the_tool_with_full_arguments_passes_the_spec_checking_fake(
    tool: Tool, ids: Ids, fake_crm: FakeCrm, location: Location
) -> None:
    args = FULL[tool.name](ids)
    Draft202012Validator(tool.input_schema, format_checker=FormatChecker()).validate(args)
    before = len(fake_crm.calls)
    result = await tool.handler(args, ToolContext(user_id="u1", crm=location.client))
    calls = fake_crm.calls[before:]
    assert calls, "the tool sent nothing"
    refused = [(c.method, c.path, c.status, c.body) for c in calls if c.status >= 400]
    assert not refused
    assert calls[-1].operation_id == OPERATION_IDS[tool.name]
    assert result is not None
