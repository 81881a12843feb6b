"""A chat offered the whole catalogue (the built-in CRM tools and an MCP server
publishing a top-level anyOf) completes on both providers against
fakes that refuse what the real APIs refuse (the `llm` fixture asserts no request was refused).
"""

from __future__ import annotations

from typing import Any

import httpx

from controlcenter.crm.tools import crm_tools
from tests.chat.helpers import Llm, set_settings, stream_chat, types
from tests.conftest import UserFactory
from tests.fakes.crm import FakeCrm
from tests.fakes.llm import Reply, ToolUse
from tests.fakes.mcp_server import FakeMcp
from tests.integration.conftest import Agency, results


def offered_schemas(llm: Llm, request: dict[str, Any]) -> dict[str, dict[str, Any]]:
    tools = request["tools"]
    if llm.name == "provider_a":
        return {t["name"]: t["input_schema"] for t in tools}
    return {t["function"]["name"]: t["function"]["parameters"] for t in tools}


async def test_a_chat_with_every_tool_completes(
    client: httpx.AsyncClient,
    llm: Llm,
    users: UserFactory,
    agency: Agency,
    fake_crm: FakeCrm,
    fake_mcp: FakeMcp,
) -> None:
    location = agency.location()
    broker = await agency.broker(users, llm, location)
    await set_settings(agency.server, {"mcpServerUrl": fake_mcp.url}, broker)
    llm.fake.script(
        Reply(
            text="On it.",
            tool_uses=[
                ToolUse(
                    "contacts_create-contact",
                    {"firstName": "Ada", "email": "ada@harbor.example"},
                    id="t1",
                ),
                ToolUse("schedule_showing", {"listing_id": "L-9"}, id="t2"),  # breaks the anyOf
            ],
        ),
        Reply(
            tool_uses=[ToolUse("schedule_showing", {"listing_id": "L-9", "phone": "+1"}, id="t3")]
        ),
        Reply(text=" Ada is in the CRM and her showing is booked."),
    )
    _, events = await stream_chat(client, broker, {"message": "Add Ada", "provider": llm.name})

    assert types(events)[0] == "message_start" and types(events)[-1] == "message_complete"
    schemas = offered_schemas(llm, llm.fake.requests[0])
    assert len(schemas) == len(crm_tools()) + 6  # the MCP fake's six tools
    assert {"contacts_create-contact", "schedule_showing"} <= set(schemas)
    for name, schema in schemas.items():
        assert schema["type"] == "object", name
        assert not {"oneOf", "anyOf", "allOf"} & set(schema), name
    created, refused, booked = results(events)
    assert created["success"] is True
    assert created["result"]["contact"]["email"] == "ada@harbor.example"
    assert refused == {
        "toolCallId": "t2",
        "success": False,
        "error": "Invalid arguments: Give at least one of: email; phone.",
    }
    assert booked == {
        "toolCallId": "t3",
        "success": True,
        "result": {"result": "showing of L-9 booked for +1"},
    }
    assert fake_mcp.calls == [("schedule_showing", {"listing_id": "L-9", "email": None})]
    assert [c.method for c in fake_crm.calls_to("POST", "/contacts/")] == ["POST"]
    assert events[-1]["message"]["content"] == "On it. Ada is in the CRM and her showing is booked."
