"""Every call the assistant makes to a tool that writes is an entry of its broker's ledger:
what it did in words, where, when and how it ended; listed newest first, searched and paged like
the conversations, kept as long as the conversation, and seen by administrators."""

from __future__ import annotations

import re

import httpx
from sqlalchemy import func, select

from controlcenter.activity.models import ActivityEntry
from controlcenter.tools.base import Tool, ToolContext
from controlcenter.tools.router import StaticSource
from tests.activity.conftest import ACTIVITY, ADMIN_ACTIVITY, Desk
from tests.chat.helpers import ISO, MESSAGE_ID
from tests.conftest import RunningServer, UserFactory
from tests.dbtools import reading

ADA = {"firstName": "Ada", "lastName": "Lovelace", "email": "ada@example.com", "phone": "555-0100"}


async def test_an_update_is_an_entry_with_the_value_before_and_after(desk: Desk) -> None:
    ada = desk.crm.add_contact(desk.location, **ADA)
    reads_before = len(desk.crm.calls_to("GET", f"/contacts/{ada['id']}"))
    conversation = await desk.chat(
        ("contacts_update-contact", {"contactId": ada["id"], "phone": "555-0199"})
    )
    [entry] = await desk.entries()
    assert entry == {
        "id": entry["id"],
        "createdAt": entry["createdAt"],
        "tool": "contacts_update-contact",
        "title": "Update a contact",
        "summary": "Phone of Ada Lovelace: 555-0100 → 555-0199",
        "conversationId": conversation,
        "messageId": entry["messageId"],
        "toolCallId": "toolu_0",
        "state": "done",
        "undoable": True,
    }
    assert MESSAGE_ID.match(entry["messageId"]) and ISO.match(entry["createdAt"])
    # One read of the contact just before the write, through the broker's own location token.
    calls = [c for c in desk.crm.calls if c.path == f"/contacts/{ada['id']}"]
    assert [c.method for c in calls][reads_before:] == ["GET", "PUT"]
    assert {c.location_id for c in calls} == {desk.location}


async def test_reads_are_not_entries_and_a_failed_write_is(desk: Desk) -> None:
    ada = desk.crm.add_contact(desk.location, **ADA)
    await desk.chat(
        ("contacts_get-contact", {"contactId": ada["id"]}),
        ("contacts_create-note", {"contactId": "nobody", "body": "Call back"}),
    )
    [entry] = await desk.entries()
    assert entry["tool"] == "contacts_create-note"
    assert entry["state"] == "failed" and entry["undoable"] is False
    assert entry["summary"] == "Note created for contact nobody: Call back"


async def test_a_write_refused_by_its_schema_ran_nothing_and_is_no_entry(desk: Desk) -> None:
    await desk.chat(("contacts_update-contact", {"contactId": "x"}))  # no field to change
    assert await desk.entries() == []


async def test_an_mcp_style_write_is_an_entry_without_undo(
    desk: Desk, server: RunningServer
) -> None:
    """A tool of another source that does not say it only reads (an MCP tool without
    `readOnlyHint: true`) is entered too, by its title; it has no known inverse."""

    async def handler(arguments: dict[str, object], context: ToolContext) -> object:
        return {"ok": True}

    tool = Tool(
        name="listing_publish",
        description="Publish a listing.",
        input_schema={"type": "object", "properties": {"listing": {"type": "string"}}},
        handler=handler,
        title="Publish a listing",
    )
    reader = Tool(
        name="listing_read",
        description="Read a listing.",
        input_schema={"type": "object", "properties": {}},
        handler=handler,
        read_only=True,
    )
    source = StaticSource([tool, reader])
    server.tools.sources.append(source)
    try:
        await desk.chat(("listing_publish", {"listing": "5th Ave"}), ("listing_read", {}))
    finally:
        server.tools.sources.remove(source)
    [entry] = await desk.entries()
    assert entry["title"] == "Publish a listing"
    assert entry["summary"] == "Publish a listing: listing: 5th Ave"
    assert (entry["state"], entry["undoable"]) == ("done", False)
    refused = await desk.undo(entry["id"])
    assert refused.status_code == 422 and refused.json() == {"error": "Cannot be undone"}


async def test_newest_first_searched_and_paged_like_the_conversations(desk: Desk) -> None:
    ada = desk.crm.add_contact(desk.location, **ADA)
    for n in range(3):
        await desk.chat(("contacts_create-note", {"contactId": ada["id"], "body": f"Note {n}"}))
    await desk.chat(("contacts_add-tags", {"contactId": ada["id"], "tags": ["hot-lead"]}))
    everything = await desk.entries()
    assert [e["summary"] for e in everything] == [
        "Tags of Ada Lovelace: added hot-lead",
        *(f"Note created for Ada Lovelace: Note {n}" for n in (2, 1, 0)),
    ]
    first = await desk.client.get(ACTIVITY, params={"limit": 2}, headers=desk.broker.headers)
    body = first.json()
    assert [e["id"] for e in body["entries"]] == [e["id"] for e in everything[:2]]
    rest = await desk.client.get(
        ACTIVITY, params={"limit": 2, "cursor": body["nextCursor"]}, headers=desk.broker.headers
    )
    assert [e["id"] for e in rest.json()["entries"]] == [e["id"] for e in everything[2:]]
    assert rest.json()["nextCursor"] is None
    assert [e["summary"] for e in await desk.entries(q="HOT-")] == [everything[0]["summary"]]
    assert len(await desk.entries(q="add a note")) == 3  # the title
    assert len(await desk.entries(q="contacts_add-tags")) == 1  # the tool
    bad = await desk.client.get(ACTIVITY, params={"cursor": "x"}, headers=desk.broker.headers)
    assert bad.status_code == 400 and bad.json() == {"error": "Invalid cursor"}


async def test_one_conversations_entries_and_the_conversation_takes_them_along(
    desk: Desk, server: RunningServer
) -> None:
    ada = desk.crm.add_contact(desk.location, **ADA)
    first = await desk.chat(("contacts_create-note", {"contactId": ada["id"], "body": "One"}))
    second = await desk.chat(("contacts_create-note", {"contactId": ada["id"], "body": "Two"}))
    [only] = await desk.entries(conversationId=first)
    assert only["conversationId"] == first
    deleted = await desk.client.delete(
        f"/api/v1/control-center/conversations/{first}", headers=desk.broker.headers
    )
    assert deleted.status_code == 200
    assert [e["conversationId"] for e in await desk.entries()] == [second]


async def test_the_ledger_is_the_owners_and_goes_with_the_user(
    desk: Desk, users: UserFactory, server: RunningServer
) -> None:
    ada = desk.crm.add_contact(desk.location, **ADA)
    await desk.chat(("contacts_create-note", {"contactId": ada["id"], "body": "Mine"}))
    other = await users.create()
    assert await desk.entries(other) == []
    signed_out = await desk.client.get(ACTIVITY)
    assert signed_out.status_code == 401 and signed_out.json() == {"error": "Unauthorized"}
    admin = await users.create("admin")
    deleted = await desk.client.delete(
        f"/api/v1/admin/users/{desk.broker.id}", headers=admin.headers
    )
    assert deleted.status_code in (200, 204), deleted.text
    async with reading(server.db) as db:
        assert await db.scalar(select(func.count()).select_from(ActivityEntry)) == 0


async def test_administrators_see_every_brokers_entries_and_cannot_undo_them(
    desk: Desk, users: UserFactory, client: httpx.AsyncClient
) -> None:
    ada = desk.crm.add_contact(desk.location, **ADA)
    await desk.chat(("contacts_update-contact", {"contactId": ada["id"], "phone": "555-0199"}))
    [entry] = await desk.entries()
    for role in ("admin", "super_admin"):
        admin = await users.create(role)
        seen = await client.get(ADMIN_ACTIVITY, headers=admin.headers)
        assert seen.status_code == 200
        [listed] = seen.json()["entries"]
        assert listed == {**entry, "userId": desk.broker.id}
        one = await client.get(ADMIN_ACTIVITY, params={"userId": admin.id}, headers=admin.headers)
        assert one.json() == {"entries": [], "nextCursor": None}
        refused = await desk.undo(entry["id"], admin)
        assert refused.status_code == 404 and refused.json() == {"error": "Entry not found"}
    forbidden = await client.get(ADMIN_ACTIVITY, headers=desk.broker.headers)
    assert forbidden.status_code == 403
    assert re.fullmatch(r"\+?555-0199", desk.crm.state.contacts[ada["id"]]["phone"])
