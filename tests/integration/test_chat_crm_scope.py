"""One broker can never reach another's CRM data through the chat; an unlinked broker is told."""

from __future__ import annotations

import json

import httpx

from controlcenter.crm.tools import NOT_CONNECTED
from tests.chat.helpers import Llm, stream_chat, types
from tests.conftest import UserFactory
from tests.fakes.crm import FakeCrm
from tests.fakes.llm import Reply, ToolUse
from tests.integration.conftest import Agency, results

NOT_YOURS = "That contact is not in this user's CRM account, so it cannot be used."


async def test_another_brokers_contact_is_unreachable(
    client: httpx.AsyncClient, llm: Llm, users: UserFactory, agency: Agency, fake_crm: FakeCrm
) -> None:
    mine, theirs = agency.location(), agency.location()
    fake_crm.add_contact(mine, firstName="Ada", email="ada@mine.example")
    secret = fake_crm.add_contact(
        theirs,
        firstName="Bartholomew",
        email="bart@theirs.example",
        companyName="Confidential Holdings",
        tags=["vip"],
    )
    broker_a = await agency.broker(users, llm, mine)
    await agency.broker(users, llm, theirs)
    target = {"contactId": secret["id"]}
    llm.fake.script(
        Reply(
            tool_uses=[
                ToolUse("contacts_get-contact", target, id="r1"),
                ToolUse("contacts_add-tags", {**target, "tags": ["hijacked"]}, id="r2"),
                ToolUse("contacts_get-contacts", {"query": "bart"}, id="r3"),
            ]
        ),
        Reply(text="I cannot see that contact."),
    )
    _, events = await stream_chat(client, broker_a, {"message": "Bart?", "provider": llm.name})

    assert results(events) == [
        {"toolCallId": "r1", "success": False, "error": NOT_YOURS},
        {"toolCallId": "r2", "success": False, "error": NOT_YOURS},
        {
            "toolCallId": "r3",
            "success": True,
            "result": {"contacts": [], "total": 0},
        },
    ]
    assert types(events)[-1] == "message_complete"
    # Nothing of B's record reached A, neither in the stream nor in what the model read.
    seen = json.dumps(events) + json.dumps(llm.fake.requests)
    for value in ("Bartholomew", "bart@theirs.example", "Confidential Holdings", "vip"):
        assert value not in seen
    stored = fake_crm.contact(secret["id"])
    assert stored is not None and stored["tags"] == ["vip"]
    # Every call was made with A's location token, which the CRM refused for B's record (the
    # ledger's read of the contact just before the tags' write included).
    crm_calls = [c for c in fake_crm.calls if not c.path.startswith("/oauth/")]
    assert {c.location_id for c in crm_calls} == {mine}
    assert [(c.method, c.status) for c in crm_calls] == [
        ("GET", 403),
        ("GET", 403),
        ("POST", 403),
        ("POST", 200),
    ]


async def test_a_broker_without_a_linked_location_is_told_and_the_chat_goes_on(
    client: httpx.AsyncClient, llm: Llm, users: UserFactory, agency: Agency, fake_crm: FakeCrm
) -> None:
    fake_crm.add_contact(agency.location(), firstName="Ada", email="ada@mine.example")
    broker = await agency.broker(users, llm, None)
    llm.fake.script(
        Reply(text="Looking.", tool_uses=[ToolUse("contacts_get-contacts", {}, id="n1")]),
        Reply(text=" Your CRM is not connected yet."),
    )
    _, events = await stream_chat(client, broker, {"message": "My contacts?", "provider": llm.name})

    assert results(events) == [{"toolCallId": "n1", "success": False, "error": NOT_CONNECTED}]
    assert types(events) == [
        "message_start",
        "content_delta",
        "tool_call_start",
        "tool_result",
        "content_delta",
        "message_complete",
    ]
    assert events[-1]["message"]["content"] == "Looking. Your CRM is not connected yet."
    second = [text for _, text in llm.turns(llm.fake.requests[1])]
    assert f"Tool n1 error: {NOT_CONNECTED}" in second
    assert fake_crm.calls == []
