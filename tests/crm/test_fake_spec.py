"""The fake CRM enforces HighLevel's OpenAPI description: for every operation the service
uses, a request the spec accepts is answered in the spec's shape, and one it refuses is refused
with HighLevel's status and error body."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from tests.fakes.crm import FakeCrm
from tests.fakes.crm_spec import BY_ID, OPERATIONS


@dataclass
class World:
    """One location with a record of every kind, and its private integration token."""

    location: str
    token: str
    agency_token: str
    company: str
    contact: str
    conversation: str
    pipeline: str
    stage: str
    opportunity: str
    calendar: str
    event: str
    order: str
    transaction: str
    task: str
    note: str


@pytest.fixture
def world(fake_crm: FakeCrm) -> World:
    agency = fake_crm.add_agency()
    company = fake_crm.company_of(agency)
    location = fake_crm.add_location(company_id=company)["id"]
    contact = fake_crm.add_contact(location, email="dana@example.com", phone="+15550100001")
    conversation = fake_crm.add_conversation(contact["id"])
    fake_crm.add_message(conversation["id"], "Hello")
    pipeline = fake_crm.add_pipeline(location, "Leasing", ["New", "Won"])
    opportunity = fake_crm.add_opportunity(pipeline["id"], contact["id"], "Lease")
    calendar = fake_crm.add_calendar(location, "Tours")
    event = fake_crm.add_event(calendar["id"], contact["id"], datetime.now(UTC))
    fake_crm.add_custom_field(location, "Size")
    fake_crm.add_template(location, "Listing")
    return World(
        location=location,
        token=fake_crm.private_token(location),
        agency_token=agency,
        company=company,
        contact=contact["id"],
        conversation=conversation["id"],
        pipeline=pipeline["id"],
        stage=pipeline["stages"][1]["id"],
        opportunity=opportunity["id"],
        calendar=calendar["id"],
        event=event["id"],
        order=fake_crm.add_order(location, contact["id"], 10.0)["_id"],
        transaction=fake_crm.add_transaction(location, contact["id"], 10.0)["_id"],
        task=fake_crm.add_task(contact["id"], title="Call back")["id"],
        note=fake_crm.add_note(contact["id"], "Needs docks")["id"],
    )


@dataclass(frozen=True)
class Ask:
    """One request: path (formatted with the world), query, JSON body."""

    path: str
    query: dict[str, Any] | None = None
    body: Any = None


@dataclass(frozen=True)
class Case:
    accepted: Callable[[World], Ask]
    refused: Callable[[World], Ask]
    message: list[str]  # the 422 answer's `message`


def new_deal(w: World) -> dict[str, Any]:
    return {
        "locationId": w.location,
        "pipelineId": w.pipeline,
        "name": "Deal",
        "contactId": w.contact,
    }


def ms(days: float) -> int:
    return int((datetime.now(UTC) + timedelta(days=days)).timestamp() * 1000)


CASES: dict[str, Case] = {
    "get-location-access-token": Case(
        lambda w: Ask(
            "/oauth/locationToken", body={"companyId": w.company, "locationId": w.location}
        ),
        lambda w: Ask("/oauth/locationToken", body={"companyId": w.company}),
        ["locationId should not be empty"],
    ),
    "search-contacts-advanced": Case(
        lambda w: Ask("/contacts/search", body={"locationId": w.location, "pageLimit": 5}),
        lambda w: Ask("/contacts/search", body={"locationId": w.location, "limit": 5}),
        ["property limit should not exist"],
    ),
    "get-contacts": Case(
        lambda w: Ask("/contacts/", {"locationId": w.location, "query": "dana", "limit": 5}),
        lambda w: Ask("/contacts/", {"query": "dana"}),
        ["locationId should not be empty"],
    ),
    "get-contact": Case(
        lambda w: Ask(f"/contacts/{w.contact}"),
        lambda w: Ask(f"/contacts/{w.contact}", {"locationId": w.location}),
        ["property locationId should not exist"],
    ),
    "create-contact": Case(
        lambda w: Ask("/contacts/", body={"locationId": w.location, "email": "new@example.com"}),
        lambda w: Ask("/contacts/", body={"email": "new@example.com", "dnd": "yes"}),
        ["locationId should not be empty", "dnd must be a boolean value"],
    ),
    "update-contact": Case(
        lambda w: Ask(f"/contacts/{w.contact}", body={"city": "Austin", "tags": ["a"]}),
        lambda w: Ask(f"/contacts/{w.contact}", body={"companyName": "Pier 9"}),
        ["property companyName should not exist"],
    ),
    "upsert-contact": Case(
        lambda w: Ask(
            "/contacts/upsert",
            body={"locationId": w.location, "email": "dana@example.com", "companyName": "P"},
        ),
        lambda w: Ask(
            "/contacts/upsert",
            body={
                "locationId": w.location,
                "email": "dana@example.com",
                "customFields": [{"key": "contact.size", "field_value": "1"}],
            },
        ),
        ["customFields.0.id should not be empty"],
    ),
    "add-tags": Case(
        lambda w: Ask(f"/contacts/{w.contact}/tags", body={"tags": ["hot"]}),
        lambda w: Ask(f"/contacts/{w.contact}/tags", body={"tags": "hot"}),
        ["tags must be an array"],
    ),
    "remove-tags": Case(
        lambda w: Ask(f"/contacts/{w.contact}/tags", body={"tags": ["hot"]}),
        lambda w: Ask(f"/contacts/{w.contact}/tags", body={}),
        ["tags should not be empty"],
    ),
    "get-all-tasks": Case(
        lambda w: Ask(f"/contacts/{w.contact}/tasks"),
        lambda w: Ask(f"/contacts/{w.contact}/tasks", {"limit": 5}),
        ["property limit should not exist"],
    ),
    "create-task": Case(
        lambda w: Ask(
            f"/contacts/{w.contact}/tasks",
            body={"title": "Call", "dueDate": "2030-01-01T09:00:00Z", "completed": False},
        ),
        lambda w: Ask(
            f"/contacts/{w.contact}/tasks", body={"title": "Call", "dueDate": "2030-01-01"}
        ),
        ["completed should not be empty"],
    ),
    "delete-contact": Case(
        lambda w: Ask(f"/contacts/{w.contact}"),
        lambda w: Ask(f"/contacts/{w.contact}", {"locationId": w.location}),
        ["property locationId should not exist"],
    ),
    "get-task": Case(
        lambda w: Ask(f"/contacts/{w.contact}/tasks/{w.task}"),
        lambda w: Ask(f"/contacts/{w.contact}/tasks/{w.task}", {"completed": "true"}),
        ["property completed should not exist"],
    ),
    "delete-task": Case(
        lambda w: Ask(f"/contacts/{w.contact}/tasks/{w.task}"),
        lambda w: Ask(f"/contacts/{w.contact}/tasks/{w.task}", {"locationId": w.location}),
        ["property locationId should not exist"],
    ),
    "get-note": Case(
        lambda w: Ask(f"/contacts/{w.contact}/notes/{w.note}"),
        lambda w: Ask(f"/contacts/{w.contact}/notes/{w.note}", {"offset": 0}),
        ["property offset should not exist"],
    ),
    "delete-note": Case(
        lambda w: Ask(f"/contacts/{w.contact}/notes/{w.note}"),
        lambda w: Ask(f"/contacts/{w.contact}/notes/{w.note}", {"locationId": w.location}),
        ["property locationId should not exist"],
    ),
    "delete-opportunity": Case(
        lambda w: Ask(f"/opportunities/{w.opportunity}"),
        lambda w: Ask(f"/opportunities/{w.opportunity}", {"location_id": w.location}),
        ["property location_id should not exist"],
    ),
    "get-all-notes": Case(
        lambda w: Ask(f"/contacts/{w.contact}/notes"),
        lambda w: Ask(f"/contacts/{w.contact}/notes", {"offset": 0}),
        ["property offset should not exist"],
    ),
    "create-note": Case(
        lambda w: Ask(f"/contacts/{w.contact}/notes", body={"body": "Needs docks"}),
        lambda w: Ask(f"/contacts/{w.contact}/notes", body={"body": "x", "pinned": "yes"}),
        ["pinned must be a boolean value"],
    ),
    "search-conversation": Case(
        lambda w: Ask("/conversations/search", {"locationId": w.location, "limit": 5}),
        lambda w: Ask("/conversations/search", {"locationId": w.location, "sort": "newest"}),
        ["sort must be one of the following values: asc, desc"],
    ),
    "get-messages": Case(
        lambda w: Ask(f"/conversations/{w.conversation}/messages", {"limit": 5}),
        lambda w: Ask(f"/conversations/{w.conversation}/messages", {"limit": "many"}),
        ["limit must be a number conforming to the specified constraints"],
    ),
    "send-a-new-message": Case(
        lambda w: Ask(
            "/conversations/messages",
            body={
                "type": "SMS",
                "subType": "SMS",
                "status": "pending",
                "contactId": w.contact,
                "message": "Hi",
            },
        ),
        lambda w: Ask(
            "/conversations/messages", body={"type": "SMS", "contactId": w.contact, "message": "Hi"}
        ),
        ["subType should not be empty", "status should not be empty"],
    ),
    "search-opportunity": Case(
        lambda w: Ask("/opportunities/search", {"location_id": w.location, "status": "all"}),
        lambda w: Ask("/opportunities/search", {"locationId": w.location}),
        ["property locationId should not exist", "location_id should not be empty"],
    ),
    "get-opportunity": Case(
        lambda w: Ask(f"/opportunities/{w.opportunity}"),
        lambda w: Ask(f"/opportunities/{w.opportunity}", {"location_id": w.location}),
        ["property location_id should not exist"],
    ),
    "create-opportunity": Case(
        lambda w: Ask("/opportunities/", body={**new_deal(w), "status": "open"}),
        lambda w: Ask("/opportunities/", body=new_deal(w)),
        ["status should not be empty"],
    ),
    "update-opportunity": Case(
        lambda w: Ask(f"/opportunities/{w.opportunity}", body={"pipelineStageId": w.stage}),
        lambda w: Ask(f"/opportunities/{w.opportunity}", body={"status": "closed"}),
        ["status must be one of the following values: open, won, lost, abandoned, all"],
    ),
    "get-pipelines": Case(
        lambda w: Ask("/opportunities/pipelines", {"locationId": w.location}),
        lambda w: Ask("/opportunities/pipelines"),
        ["locationId should not be empty"],
    ),
    "get-calendars": Case(
        lambda w: Ask("/calendars/", {"locationId": w.location, "showDrafted": "true"}),
        lambda w: Ask("/calendars/", {"locationId": w.location, "showDrafted": "maybe"}),
        ["showDrafted must be a boolean value"],
    ),
    "get-calendar-events": Case(
        lambda w: Ask(
            "/calendars/events",
            {
                "locationId": w.location,
                "calendarId": w.calendar,
                "startTime": ms(-1),
                "endTime": ms(1),
            },
        ),
        lambda w: Ask("/calendars/events", {"locationId": w.location, "calendarId": w.calendar}),
        ["startTime should not be empty", "endTime should not be empty"],
    ),
    "get-appointment-notes": Case(
        lambda w: Ask(f"/calendars/appointments/{w.event}/notes", {"limit": 5, "offset": 0}),
        lambda w: Ask(f"/calendars/appointments/{w.event}/notes", {"limit": 5}),
        ["offset should not be empty"],
    ),
    "get-slots": Case(
        lambda w: Ask(
            f"/calendars/{w.calendar}/free-slots", {"startDate": ms(0), "endDate": ms(2)}
        ),
        lambda w: Ask(
            f"/calendars/{w.calendar}/free-slots", {"startDate": "2030-01-01", "endDate": ms(2)}
        ),
        ["startDate must be a number conforming to the specified constraints"],
    ),
    "get-location": Case(
        lambda w: Ask(f"/locations/{w.location}"),
        lambda w: Ask(f"/locations/{w.location}", {"model": "contact"}),
        ["property model should not exist"],
    ),
    "get-custom-fields": Case(
        lambda w: Ask(f"/locations/{w.location}/customFields", {"model": "contact"}),
        lambda w: Ask(f"/locations/{w.location}/customFields", {"model": "company"}),
        ["model must be one of the following values: contact, opportunity, all"],
    ),
    "get-location-tags": Case(
        lambda w: Ask(f"/locations/{w.location}/tags"),
        lambda w: Ask(f"/locations/{w.location}/tags", {"limit": 5}),
        ["property limit should not exist"],
    ),
    "fetch-template": Case(
        lambda w: Ask("/emails/builder", {"locationId": w.location, "limit": 5, "offset": 0}),
        lambda w: Ask("/emails/builder", {"locationId": w.location, "builderVersion": "3"}),
        ["builderVersion must be one of the following values: 1, 2"],
    ),
    "list-orders": Case(
        lambda w: Ask("/payments/orders", {"altId": w.location, "limit": 5, "offset": 0}),
        lambda w: Ask("/payments/orders", {"altId": w.location, "altType": "location"}),
        ["property altType should not exist"],
    ),
    "get-order-by-id": Case(
        lambda w: Ask(f"/payments/orders/{w.order}", {"altId": w.location}),
        lambda w: Ask(f"/payments/orders/{w.order}", {"locationId": w.location}),
        ["altId should not be empty"],
    ),
    "list-transactions": Case(
        lambda w: Ask("/payments/transactions", {"altId": w.location, "altType": "location"}),
        lambda w: Ask("/payments/transactions", {"altId": w.location}),
        ["altType should not be empty"],
    ),
    "get-transaction-by-id": Case(
        lambda w: Ask(
            f"/payments/transactions/{w.transaction}", {"altId": w.location, "altType": "location"}
        ),
        lambda w: Ask(
            f"/payments/transactions/{w.transaction}",
            {"altId": w.location, "altType": "location", "status": "paid"},
        ),
        ["property status should not exist"],
    ),
    "get-user-by-location": Case(
        lambda w: Ask("/users/", {"locationId": w.location}),
        lambda w: Ask("/users/", {"companyId": "x", "locationId": w.location}),
        ["property companyId should not exist"],
    ),
}


@pytest.fixture
async def http(fake_crm: FakeCrm) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=fake_crm.url, timeout=5) as client:
        yield client


async def send(
    http: httpx.AsyncClient, world: World, operation_id: str, ask: Ask, **headers: str
) -> httpx.Response:
    operation = BY_ID[operation_id]
    oauth = operation.path.startswith("/oauth/")
    token = world.agency_token if oauth else world.token
    sent = {"Authorization": f"Bearer {token}", "Version": operation.version, **headers}
    content: dict[str, Any] = {}
    if ask.body is not None:
        content = {"data": ask.body} if operation.form else {"json": ask.body}
    return await http.request(operation.method, ask.path, params=ask.query, headers=sent, **content)


def test_every_operation_has_a_case() -> None:
    assert set(CASES) == set(BY_ID)


@pytest.mark.parametrize("operation_id", sorted(CASES))
async def test_the_spec_accepts_and_the_answer_has_its_shape(
    operation_id: str, http: httpx.AsyncClient, world: World, fake_crm: FakeCrm
) -> None:
    operation = BY_ID[operation_id]
    response = await send(http, world, operation_id, CASES[operation_id].accepted(world))
    assert response.status_code == operation.status, response.text
    answer = response.json()
    assert isinstance(answer, dict)
    if operation.answer:
        assert set(answer) <= set(operation.answer), set(answer) - set(operation.answer)
    assert fake_crm.calls[-1].operation_id == operation_id


@pytest.mark.parametrize("operation_id", sorted(CASES))
async def test_the_spec_refuses_with_highlevels_422(
    operation_id: str, http: httpx.AsyncClient, world: World
) -> None:
    case = CASES[operation_id]
    response = await send(http, world, operation_id, case.refused(world))
    assert response.status_code == 422, response.text
    assert response.json() == {
        "statusCode": 422,
        "message": case.message,
        "error": "Unprocessable Entity",
    }


@pytest.mark.parametrize("operation", OPERATIONS, ids=lambda op: op.operation_id)
async def test_the_version_header_is_the_operations(
    operation: Any, http: httpx.AsyncClient, world: World
) -> None:
    ask = CASES[operation.operation_id].accepted(world)
    other = "2021-04-15" if operation.version == "2021-07-28" else "2021-07-28"
    wrong = await send(http, world, operation.operation_id, ask, Version=other)
    assert wrong.status_code == 400
    assert wrong.json()["message"] == f"Version {other} is not supported for {operation.path}"


async def test_a_path_or_method_no_operation_declares_is_nestjs_404(
    http: httpx.AsyncClient, world: World
) -> None:
    headers = {"Authorization": f"Bearer {world.token}", "Version": "2021-07-28"}
    for method, path in (("GET", "/contacts/x/unknown"), ("PATCH", f"/contacts/{world.contact}")):
        response = await http.request(method, path, headers=headers)
        assert response.status_code == 404
        assert response.json() == {
            "statusCode": 404,
            "message": f"Cannot {method} {path}",
            "error": "Not Found",
        }


async def test_nested_unknown_properties_are_refused(http: httpx.AsyncClient, world: World) -> None:
    ask = Ask(
        "/contacts/upsert",
        body={
            "locationId": world.location,
            "email": "dana@example.com",
            "dndSettings": {"SMS": {"status": "active", "reason": "asked"}},
        },
    )
    response = await send(http, world, "upsert-contact", ask)
    assert response.status_code == 422
    assert response.json()["message"] == ["dndSettings.SMS.property reason should not exist"]


async def test_upsert_tags_replace_and_the_tags_endpoint_adds(
    http: httpx.AsyncClient, world: World, fake_crm: FakeCrm
) -> None:
    """HighLevel's UpsertContactDto documents `tags` as "This field will overwrite all current
    tags associated with the contact" and points to Add Tag for adding: the outbox adds its
    tags through POST /contacts/{id}/tags and never sends `tags` in an upsert (docs/outbox.md),
    and the fake is as strict as that, so a delivery relying on additive upsert tags fails."""
    headers = {"Authorization": f"Bearer {world.token}", "Version": "2021-07-28"}
    body = {"locationId": world.location, "email": "dana@example.com"}
    added = await http.post(
        f"/contacts/{world.contact}/tags", json={"tags": ["a"]}, headers=headers
    )
    assert added.status_code == 201 and added.json()["tags"] == ["a"]
    added = await http.post(
        f"/contacts/{world.contact}/tags", json={"tags": ["b"]}, headers=headers
    )
    assert added.json()["tags"] == ["a", "b"]  # kept the tag it had
    answer = await http.post("/contacts/upsert", json={**body, "tags": ["c"]}, headers=headers)
    assert answer.status_code == 200 and answer.json()["contact"]["id"] == world.contact
    assert fake_crm.state.contacts[world.contact]["tags"] == ["c"]  # replaced, not added
    await http.post("/contacts/upsert", json={**body, "name": "Dana"}, headers=headers)
    assert fake_crm.state.contacts[world.contact]["tags"] == ["c"]  # no `tags`: left alone


async def test_a_deleted_record_is_gone_and_another_contacts_task_is_not_found(
    http: httpx.AsyncClient, world: World, fake_crm: FakeCrm
) -> None:
    headers = {"Authorization": f"Bearer {world.token}", "Version": "2021-07-28"}
    other = fake_crm.add_contact(world.location, email="omar@example.com")["id"]
    wrong = await http.get(f"/contacts/{other}/tasks/{world.task}", headers=headers)
    assert wrong.status_code == 404
    assert wrong.json() == {"statusCode": 404, "message": "Task not found", "error": "Not Found"}
    gone = await http.delete(f"/contacts/{world.contact}/notes/{world.note}", headers=headers)
    assert gone.json() == {"succeded": True}
    again = await http.get(f"/contacts/{world.contact}/notes/{world.note}", headers=headers)
    assert again.status_code == 404 and again.json()["message"] == "Note not found"
    await http.delete(f"/contacts/{world.contact}", headers=headers)
    assert world.contact not in fake_crm.state.contacts
    assert world.task not in fake_crm.state.tasks  # its tasks went with it
