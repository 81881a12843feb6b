"""The approval of writes through the tools as the service offers them (the CRM
catalogue and the MCP source, each behind the metrics wrapper), not a test toolbox: under
`toolApproval: "writes"` a read runs at once and a write asks first.

The approval tests hand the chat their own tools; this one checks that the wrapper keeps each
tool's `read_only` flag, so that a read does not ask for approval in the service as deployed.
"""

from __future__ import annotations

import httpx

from tests.chat.helpers import Llm, set_settings, stream_chat, types
from tests.conftest import UserFactory
from tests.fakes.crm import FakeCrm
from tests.fakes.llm import Reply, ToolUse
from tests.fakes.mcp_server import FakeMcp
from tests.integration.conftest import Agency, results

POLICY = "/api/v1/admin/chat-policy"


async def test_reads_of_the_catalogue_and_mcp_run_without_asking(
    client: httpx.AsyncClient,
    llm: Llm,
    users: UserFactory,
    agency: Agency,
    fake_crm: FakeCrm,
    fake_mcp: FakeMcp,
) -> None:
    boss = await users.create("super_admin")
    answer = await client.put(POLICY, json={"toolApproval": "writes"}, headers=boss.headers)
    assert answer.status_code == 200
    broker = await agency.broker(users, llm, agency.location())
    await set_settings(agency.server, {"mcpServerUrl": fake_mcp.url}, broker)
    llm.fake.script(
        Reply(
            tool_uses=[
                ToolUse("contacts_get-contacts", {"query": "Ada"}, id="r1"),  # CRM, a read
                ToolUse("lookup_listing", {"mls_number": "L-9"}, id="r2"),  # readOnlyHint
            ]
        ),
        Reply(text="Nothing new on Ada; L-9 is active."),
    )

    _, events = await stream_chat(client, broker, {"message": "Ada?", "provider": llm.name})

    assert "tool_approval_required" not in types(events)
    assert types(events)[-1] == "message_complete"
    searched, looked_up = results(events)
    assert searched["success"] is True and looked_up["success"] is True
    assert fake_crm.calls_to("POST", "/contacts/search")
    assert fake_mcp.calls == [("lookup_listing", {"mls_number": "L-9"})]
