"""Every tool of the catalogue, with every argument it takes, against the spec-checking fake:
a tool whose request drifts from HighLevel's OpenAPI description fails here."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from jsonschema import Draft202012Validator, FormatChecker

from controlcenter.activity.inverses import WRITES, ChangedSinceError, Done, same, write_of
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


# -- the ledger's reads and inverse calls ----------------------------------------------------

# For each write with a known inverse: the operation read just before it (None: nothing), and
# the operations of its undo, in order (the read that checks the object, then the inverse).
UNDONE_BY: dict[str, tuple[str | None, tuple[str, str]]] = {
    "contacts_create-contact": (None, ("get-contact", "delete-contact")),
    "contacts_upsert-contact": (None, ("get-contact", "delete-contact")),
    "contacts_update-contact": ("get-contact", ("get-contact", "update-contact")),
    "contacts_add-tags": ("get-contact", ("get-contact", "remove-tags")),
    "contacts_remove-tags": ("get-contact", ("get-contact", "add-tags")),
    "contacts_create-task": ("get-contact", ("get-task", "delete-task")),
    "contacts_create-note": ("get-contact", ("get-note", "delete-note")),
    "opportunities_create-opportunity": ("get-contact", ("get-opportunity", "delete-opportunity")),
    "opportunities_update-opportunity": (
        "get-opportunity",
        ("get-opportunity", "update-opportunity"),
    ),
}


def test_every_write_of_the_catalogue_is_classified_for_the_ledger() -> None:
    """The ledger knows every built-in write: its inverse, or that it has none."""
    assert set(WRITES) == {name for name, tool in TOOLS.items() if not tool.read_only}
    assert set(UNDONE_BY) == {n for n in WRITES if n != "conversations_send-a-new-message"}


@pytest.mark.parametrize("name", list(UNDONE_BY))
async def test_the_ledger_reads_and_undoes_each_write_as_highlevel_declares(
    name: str, ids: Ids, fake_crm: FakeCrm, location: Location
) -> None:
    args = FULL[name](ids)
    if name == "contacts_upsert-contact":
        args |= {"email": "new@okafordental.example", "phone": "+15550100077"}  # creates one
    if name == "contacts_remove-tags":
        fake_crm.state.contacts[ids["contact"]]["tags"].append("hot")
    write = write_of(name)
    before_read, undo_ops = UNDONE_BY[name]
    start = len(fake_crm.calls)
    before = None
    where = write.before_path(args)
    assert (where is None) == (before_read is None)
    if where is not None:
        path, key = where
        before = (await location.client.get(path))[key]
    result = await TOOLS[name].handler(args, ToolContext(user_id="u1", crm=location.client))
    done = Done(args, before, result)
    assert write.undoable(done)
    middle = len(fake_crm.calls)
    await write.undo(location.client, done)
    calls = fake_crm.calls[start:]
    assert not [(c.method, c.path, c.status, c.body) for c in calls if c.status >= 400]
    assert [c.operation_id for c in fake_crm.calls[middle:]] == list(undo_ops)
    if before_read is not None:
        assert calls[0].operation_id == before_read
    # What the write changed is as it was before.
    if name in ("contacts_update-contact", "opportunities_update-opportunity"):
        table = "contacts" if name.startswith("contacts") else "opportunities"
        now = getattr(fake_crm.state, table)[args.get("contactId") or args["opportunityId"]]
        assert before is not None
        for field in args:
            if field not in ("contactId", "opportunityId"):
                assert same(field, now.get(field), before.get(field)), field
    elif name in ("contacts_add-tags", "contacts_remove-tags"):
        assert before is not None
        assert sorted(fake_crm.state.contacts[ids["contact"]]["tags"]) == sorted(before["tags"])
    else:
        made = next(v for v in result.values() if isinstance(v, dict) and "id" in v)
        tables = (fake_crm.state.contacts, fake_crm.state.tasks, fake_crm.state.notes)
        assert all(made["id"] not in t for t in (*tables, fake_crm.state.opportunities))


async def test_an_undo_refuses_an_object_changed_since(
    ids: Ids, fake_crm: FakeCrm, location: Location
) -> None:
    args = {"contactId": ids["contact"], "phone": "+15550100099"}
    before = (await location.client.get(f"/contacts/{ids['contact']}"))["contact"]
    update = TOOLS["contacts_update-contact"]
    await update.handler(args, ToolContext(user_id="u1", crm=location.client))
    fake_crm.state.contacts[ids["contact"]]["phone"] = "+15550100123"  # changed in HighLevel
    with pytest.raises(ChangedSinceError):
        await write_of("contacts_update-contact").undo(location.client, Done(args, before, {}))
    assert fake_crm.calls[-1].operation_id == "get-contact"  # read, nothing written back
    assert fake_crm.state.contacts[ids["contact"]]["phone"] == "+15550100123"
