"""Bad arguments from the model and CRM errors become failed tool results the model can act on."""

from __future__ import annotations

import httpx

from tests.chat.helpers import Llm, stream_chat, types
from tests.conftest import UserFactory
from tests.fakes.crm import FakeCrm
from tests.fakes.llm import Reply, ToolUse
from tests.integration.conftest import Agency, results


async def test_arguments_that_break_the_schema_fail_before_the_crm_and_the_model_retries(
    client: httpx.AsyncClient, llm: Llm, users: UserFactory, agency: Agency, fake_crm: FakeCrm
) -> None:
    location = agency.location()
    dana = fake_crm.add_contact(location, firstName="Dana", email="dana@northpier.example")
    broker = await agency.broker(users, llm, location)
    llm.fake.script(
        Reply(
            tool_uses=[
                ToolUse("contacts_get-contact", {"id": dana["id"]}, id="b1"),
                ToolUse("contacts_get-contacts", {"limit": 500}, id="b2"),
                ToolUse("contacts_add-tags", {"contactId": dana["id"], "tags": []}, id="b3"),
            ]
        ),
        Reply(tool_uses=[ToolUse("contacts_get-contact", {"contactId": dana["id"]}, id="b4")]),
        Reply(text="Found Dana."),
    )
    _, events = await stream_chat(client, broker, {"message": "Dana?", "provider": llm.name})

    failed, fixed = results(events)[:3], results(events)[3]
    assert failed == [
        {
            "toolCallId": "b1",
            "success": False,
            "error": "Invalid arguments: 'contactId' is a required property",
        },
        {
            "toolCallId": "b2",
            "success": False,
            "error": "Invalid arguments: 500 is greater than the maximum of 100 (at limit)",
        },
        {
            "toolCallId": "b3",
            "success": False,
            "error": "Invalid arguments: [] should be non-empty (at tags)",
        },
    ]
    # The model read why, and its corrected call went through.
    second = [text for _, text in llm.turns(llm.fake.requests[1])]
    assert [f"Tool {r['toolCallId']} error: {r['error']}" for r in failed] == second[-3:]
    assert fixed["success"] is True and fixed["result"]["contact"]["id"] == dana["id"]
    assert [c.path for c in fake_crm.calls if not c.path.startswith("/oauth/")] == [
        f"/contacts/{dana['id']}"
    ]
    assert types(events)[-1] == "message_complete"


async def test_crm_errors_become_failed_tool_results(
    client: httpx.AsyncClient, llm: Llm, users: UserFactory, agency: Agency, fake_crm: FakeCrm
) -> None:
    location = agency.location()
    dana = fake_crm.add_contact(location, firstName="Dana", email="dana@northpier.example")
    broker = await agency.broker(users, llm, location)
    llm.fake.script(
        Reply(
            tool_uses=[
                ToolUse("contacts_get-contact", {"contactId": "noSuchContact0000001"}, id="e1"),
                ToolUse(
                    "contacts_create-contact",
                    {"firstName": "Dana", "email": "dana@northpier.example"},
                    id="e2",
                ),
            ]
        ),
        Reply(text="Dana already exists."),
    )
    _, events = await stream_chat(client, broker, {"message": "Add Dana", "provider": llm.name})

    not_found, duplicate = results(events)
    assert not_found == {"toolCallId": "e1", "success": False, "error": "Contact not found."}
    assert duplicate["success"] is False
    assert duplicate["error"].startswith("The CRM refused the request: ")
    assert "duplicated contacts" in duplicate["error"]
    assert [c.status for c in fake_crm.calls if not c.path.startswith("/oauth/")] == [404, 400]
    assert len(fake_crm.contacts(location)) == 1 and fake_crm.contacts(location)[0] == dana
    assert types(events)[-1] == "message_complete"


async def test_a_crm_outage_fails_the_tool_not_the_chat(
    client: httpx.AsyncClient, llm: Llm, users: UserFactory, agency: Agency, fake_crm: FakeCrm
) -> None:
    location = agency.location()
    broker = await agency.broker(users, llm, location)
    fake_crm.outage(503)
    llm.fake.script(
        Reply(tool_uses=[ToolUse("contacts_get-contacts", {}, id="o1")]),
        Reply(text="The CRM is down; try later."),
    )
    _, events = await stream_chat(client, broker, {"message": "List", "provider": llm.name})

    assert results(events) == [
        {
            "toolCallId": "o1",
            "success": False,
            "error": "The CRM is not reachable right now; try again later.",
        }
    ]
    assert events[-1]["message"]["content"] == "The CRM is down; try later."
