"""Undo: the inverse call of each built-in CRM write, made only when the object still holds
what the write left, recorded as an entry of its own, and never told to the model."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.activity.conftest import Desk
from tests.chat.helpers import stream_chat
from tests.conftest import UserFactory
from tests.fakes.crm import FakeCrm
from tests.fakes.llm import Reply

ADA = {"firstName": "Ada", "lastName": "Lovelace", "email": "ada@example.com", "phone": "555-0100"}
DUE = (datetime.now(UTC) + timedelta(days=2)).replace(microsecond=0).isoformat()


@dataclass
class World:
    crm: FakeCrm
    contact: str
    pipeline: str
    stages: list[str]
    deal: str


@pytest.fixture
def world(desk: Desk) -> World:
    ada = desk.crm.add_contact(desk.location, **ADA, tags=["tenant"])
    pipeline = desk.crm.add_pipeline(desk.location, "Leasing", ["New lead", "Touring", "Signed"])
    stages = [s["id"] for s in pipeline["stages"]]
    deal = desk.crm.add_opportunity(pipeline["id"], ada["id"], "Ada - 5th Ave", monetaryValue=100)
    return World(desk.crm, ada["id"], pipeline["id"], stages, deal["id"])


@dataclass(frozen=True)
class Kind:
    tool: str
    arguments: Callable[[World], dict[str, Any]]
    summary: Callable[[World], str]
    undone: Callable[[World], str]  # the undo entry's summary
    reverted: Callable[[World], bool]  # the CRM is as it was before the write


def _contact(w: World) -> dict[str, Any]:
    return w.crm.state.contacts[w.contact]


KINDS = [
    Kind(
        "contacts_create-contact",
        lambda w: {"firstName": "Grace", "lastName": "Hopper", "email": "grace@example.com"},
        lambda w: "Created contact Grace Hopper (grace@example.com)",
        lambda w: "Deleted contact Grace Hopper",
        lambda w: [c["email"] for c in w.crm.state.contacts.values()] == ["ada@example.com"],
    ),
    Kind(
        "contacts_upsert-contact",
        lambda w: {"firstName": "Grace", "email": "grace@example.com"},
        lambda w: "Created contact Grace (grace@example.com)",
        lambda w: "Deleted contact Grace",
        lambda w: len(w.crm.state.contacts) == 1,
    ),
    Kind(
        "contacts_update-contact",
        lambda w: {"contactId": w.contact, "phone": "555-0199", "city": "London"},
        lambda w: "Contact Ada Lovelace: Phone: 555-0100 → 555-0199; City: (empty) → London",
        lambda w: "Contact Ada Lovelace: Phone: 555-0199 → 555-0100; City: London → (empty)",
        lambda w: _contact(w)["phone"] == "555-0100" and not _contact(w).get("city"),
    ),
    Kind(
        "contacts_add-tags",
        lambda w: {"contactId": w.contact, "tags": ["hot-lead", "tenant"]},
        lambda w: "Tags of Ada Lovelace: added hot-lead",
        lambda w: "Tags of Ada Lovelace: removed hot-lead",
        lambda w: _contact(w)["tags"] == ["tenant"],  # the tag it had stays
    ),
    Kind(
        "contacts_remove-tags",
        lambda w: {"contactId": w.contact, "tags": ["tenant"]},
        lambda w: "Tags of Ada Lovelace: removed tenant",
        lambda w: "Tags of Ada Lovelace: added tenant",
        lambda w: _contact(w)["tags"] == ["tenant"],
    ),
    Kind(
        "contacts_create-task",
        lambda w: {"contactId": w.contact, "title": "Send the lease", "dueDate": DUE},
        lambda w: "Task created for Ada Lovelace: Send the lease",
        lambda w: "Task deleted: Send the lease",
        lambda w: w.crm.state.tasks == {},
    ),
    Kind(
        "contacts_create-note",
        lambda w: {"contactId": w.contact, "body": "Wants 6 docks"},
        lambda w: "Note created for Ada Lovelace: Wants 6 docks",
        lambda w: "Note deleted: Wants 6 docks",
        lambda w: w.crm.state.notes == {},
    ),
    Kind(
        "opportunities_create-opportunity",
        lambda w: {"pipelineId": w.pipeline, "name": "Ada - Pier 9", "contactId": w.contact},
        lambda w: "Deal created for Ada Lovelace: Ada - Pier 9",
        lambda w: "Deal deleted: Ada - Pier 9",
        lambda w: list(w.crm.state.opportunities) == [w.deal],
    ),
    Kind(
        "opportunities_update-opportunity",
        lambda w: {"opportunityId": w.deal, "pipelineStageId": w.stages[2]},
        lambda w: f"Stage of deal Ada - 5th Ave: {w.stages[0]} → {w.stages[2]}",
        lambda w: f"Stage of deal Ada - 5th Ave: {w.stages[2]} → {w.stages[0]}",
        lambda w: w.crm.state.opportunities[w.deal]["pipelineStageId"] == w.stages[0],
    ),
]


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.tool)
async def test_each_kind_of_write_is_undone(desk: Desk, world: World, kind: Kind) -> None:
    conversation = await desk.chat((kind.tool, kind.arguments(world)))
    [entry] = await desk.entries()
    assert entry["summary"] == kind.summary(world)
    assert (entry["state"], entry["undoable"]) == ("done", True)
    assert not kind.reverted(world)

    answer = await desk.undo(entry["id"])
    assert answer.status_code == 200, answer.text
    undo = answer.json()["entry"]
    assert undo["summary"] == kind.undone(world)
    assert undo["title"] == "Undo: " + entry["title"]
    assert (undo["state"], undo["undoable"], undo["tool"]) == ("done", False, kind.tool)
    assert undo["conversationId"] == conversation and undo["toolCallId"] is None
    assert kind.reverted(world)
    # The undo is an entry of its own, newest first; the write is undone and stays listed.
    listed = await desk.entries()
    assert [e["id"] for e in listed] == [undo["id"], entry["id"]]
    assert (listed[1]["state"], listed[1]["undoable"]) == ("undone", False)

    again = await desk.undo(entry["id"])
    assert again.status_code == 409 and again.json() == {"error": "Already undone"}
    of_undo = await desk.undo(undo["id"])
    assert of_undo.status_code == 422 and of_undo.json() == {"error": "Cannot be undone"}


async def test_an_object_changed_since_the_write_is_not_touched(desk: Desk, world: World) -> None:
    await desk.chat(("contacts_update-contact", {"contactId": world.contact, "phone": "555-0199"}))
    _contact(world)["phone"] = "555-0142"  # the broker changed it in HighLevel since
    [entry] = await desk.entries()
    writes = len([c for c in desk.crm.calls if c.method != "GET"])
    refused = await desk.undo(entry["id"])
    assert refused.status_code == 409 and refused.json() == {"error": "Changed since"}
    assert len([c for c in desk.crm.calls if c.method != "GET"]) == writes
    assert _contact(world)["phone"] == "555-0142"
    [still] = await desk.entries()
    assert (still["state"], still["undoable"]) == ("done", True)  # offered again, it may change


async def test_a_deleted_record_has_changed_since(desk: Desk, world: World) -> None:
    await desk.chat(("contacts_create-note", {"contactId": world.contact, "body": "Gone soon"}))
    world.crm.state.notes.clear()
    [entry] = await desk.entries()
    refused = await desk.undo(entry["id"])
    assert refused.status_code == 409 and refused.json() == {"error": "Changed since"}


async def test_a_sent_message_cannot_be_undone(desk: Desk, world: World) -> None:
    args = {"type": "SMS", "contactId": world.contact, "message": "See you at 3"}
    await desk.chat(("conversations_send-a-new-message", args))
    [entry] = await desk.entries()
    assert entry["summary"] == f"SMS sent to contact {world.contact}: See you at 3"
    assert (entry["state"], entry["undoable"]) == ("done", False)
    refused = await desk.undo(entry["id"])
    assert refused.status_code == 422 and refused.json() == {"error": "Cannot be undone"}


async def test_tags_it_did_not_add_are_not_removed(desk: Desk, world: World) -> None:
    await desk.chat(("contacts_add-tags", {"contactId": world.contact, "tags": ["tenant"]}))
    [entry] = await desk.entries()
    assert entry["summary"] == "Tags of Ada Lovelace: nothing added (tenant)"
    assert entry["undoable"] is False
    assert (await desk.undo(entry["id"])).status_code == 422


async def test_another_brokers_entry_and_an_unknown_one_are_not_found(
    desk: Desk, world: World, users: UserFactory
) -> None:
    await desk.chat(("contacts_create-note", {"contactId": world.contact, "body": "Mine"}))
    [entry] = await desk.entries()
    other = await users.create()
    for user, entry_id in ((other, entry["id"]), (desk.broker, "no-such-entry")):
        refused = await desk.undo(entry_id, user)
        assert refused.status_code == 404 and refused.json() == {"error": "Entry not found"}
    assert len(world.crm.state.notes) == 1
    signed_out = await desk.client.post(f"/api/v1/control-center/activity/{entry['id']}/undo")
    assert signed_out.status_code == 401


async def test_the_crm_unreachable_during_an_undo_leaves_it_undoable(
    desk: Desk, world: World
) -> None:
    await desk.chat(("contacts_create-note", {"contactId": world.contact, "body": "Keep"}))
    [entry] = await desk.entries()
    desk.crm.outage(503)
    try:
        failed = await desk.undo(entry["id"])
    finally:
        desk.crm.outage(None)
    assert failed.status_code == 502
    assert failed.json() == {"error": "The CRM is not reachable right now; try again later."}
    [still] = await desk.entries()
    assert (still["state"], still["undoable"]) == ("done", True)
    assert (await desk.undo(entry["id"])).status_code == 200


async def test_the_model_is_not_told_of_an_undo(desk: Desk, world: World) -> None:
    conversation = await desk.chat(
        ("contacts_update-contact", {"contactId": world.contact, "phone": "555-0199"})
    )
    [entry] = await desk.entries()
    assert (await desk.undo(entry["id"])).status_code == 200
    desk.llm.fake.script(Reply(text="Sure."))
    await stream_chat(
        desk.client,
        desk.broker,
        {"message": "Thanks", "provider": desk.llm.name, "conversationId": conversation},
    )
    # The conversation as the model reads it holds nothing the undo did.
    sent = desk.llm.turns(desk.llm.fake.requests[-1])
    assert sent == [("user", "Do it"), ("assistant", "Done."), ("user", "Thanks")]
