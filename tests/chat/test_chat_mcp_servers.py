"""Chats using stored MCP servers: the stand-in for HighLevel's MCP server
(tests/fakes/highlevel_mcp.py), whose headers carry each broker's CRM location, sees every call
with the location of the broker whose chat made it; a server behind OAuth
(tests/fakes/oauth_mcp.py) is reached with a token obtained by client credentials."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from sqlalchemy import update
from structlog.testing import capture_logs

from controlcenter.auth.models import UserRecord
from tests.chat.helpers import Llm, set_settings, stream_chat, types
from tests.conftest import AppUser, RunningServer, UserFactory
from tests.dbtools import writing
from tests.fakes.highlevel_mcp import TOOLS, FakeHighLevelMcp, stored_highlevel
from tests.fakes.llm import Reply, ToolUse
from tests.fakes.oauth_mcp import CLIENT_SECRET, FakeOAuthMcp, stored_oauth


@pytest.fixture
async def highlevel_server(
    server: RunningServer, users: UserFactory, fake_highlevel: FakeHighLevelMcp
) -> AsyncIterator[None]:
    admin = await users.create("super_admin")
    async with stored_highlevel(server.app.state.mcp.stored, fake_highlevel, admin.id):
        yield


async def broker(
    server: RunningServer, users: UserFactory, llm: Llm, location: str | None
) -> AppUser:
    created = await users.create()
    await set_settings(server, {llm.setting: llm.fake.api_key}, created)
    async with writing(server.db) as db:
        await db.execute(
            update(UserRecord).where(UserRecord.id == created.id).values(crm_location_id=location)
        )
    return created


async def one_tool_call(client: httpx.AsyncClient, user: AppUser, llm: Llm, call: ToolUse) -> Any:
    """A chat of `user` in which the model makes `call`; the call's result, which succeeded."""
    llm.fake.script(Reply(text="Looking.", tool_uses=[call]), Reply(text=" Found."))
    _, events = await stream_chat(client, user, {"message": "which?", "provider": llm.name})
    assert types(events)[-1] == "message_complete"
    [result] = [e["toolResult"] for e in events if e["type"] == "tool_result"]
    assert result["success"] is True
    return result["result"]


@pytest.mark.usefixtures("highlevel_server")
async def test_two_brokers_reach_the_server_each_with_his_own_location(
    client: httpx.AsyncClient,
    server: RunningServer,
    users: UserFactory,
    llm: Llm,
    fake_highlevel: FakeHighLevelMcp,
) -> None:
    ana = await broker(server, users, llm, "LOC-ANA")
    ben = await broker(server, users, llm, "LOC-BEN")
    for who, contact, location in ((ana, "C-1", "LOC-ANA"), (ben, "C-2", "LOC-BEN")):
        result = await one_tool_call(
            client, who, llm, ToolUse("contacts_get-contact", {"contactId": contact}, id="t1")
        )
        assert result["locationId"] == location
    assert sorted(llm.offered_tools(llm.fake.requests[0])) == sorted(TOOLS)
    assert fake_highlevel.calls == [
        ("contacts_get-contact", "LOC-ANA", {"contactId": "C-1"}),
        ("contacts_get-contact", "LOC-BEN", {"contactId": "C-2"}),
    ]
    assert fake_highlevel.refused == []


@pytest.mark.usefixtures("highlevel_server")
async def test_a_broker_without_a_location_chats_without_its_tools(
    client: httpx.AsyncClient,
    server: RunningServer,
    users: UserFactory,
    llm: Llm,
    fake_highlevel: FakeHighLevelMcp,
) -> None:
    unlinked = await broker(server, users, llm, None)
    llm.fake.script(Reply(text="Hello."))
    with capture_logs() as logs:
        _, events = await stream_chat(client, unlinked, {"message": "hi", "provider": llm.name})
    assert types(events) == ["message_start", "content_delta", "message_complete"]
    assert llm.offered_tools(llm.fake.requests[0]) == []
    lines = [e for e in logs if e["event"].startswith("MCP server needs")]
    assert [e["server"] for e in lines] == ["HighLevel"]
    assert fake_highlevel.calls == [] and fake_highlevel.refused == []


@pytest.mark.usefixtures("highlevel_server")
async def test_the_tools_listed_are_the_server_tools_the_brokers_chat_is_offered(
    client: httpx.AsyncClient, server: RunningServer, users: UserFactory, llm: Llm
) -> None:
    """GET /tools lists a server that needs the broker's location for a linked broker only,
    as his chat offers it."""
    linked = await broker(server, users, llm, "LOC-ANA")
    unlinked = await broker(server, users, llm, None)
    listed = await client.get("/api/v1/control-center/tools", headers=linked.headers)
    assert listed.status_code == 200
    assert sorted(tool["name"] for tool in listed.json()["tools"]) == sorted(TOOLS)
    listed = await client.get("/api/v1/control-center/tools", headers=unlinked.headers)
    assert listed.status_code == 200
    assert listed.json()["tools"] == []


async def test_chats_reach_a_server_behind_oauth_with_one_token(
    client: httpx.AsyncClient,
    server: RunningServer,
    users: UserFactory,
    llm: Llm,
    fake_oauth_mcp: FakeOAuthMcp,
) -> None:
    admin = await users.create("super_admin")
    store = server.app.state.mcp.stored
    async with stored_oauth(store, fake_oauth_mcp, admin.id, "Listings", CLIENT_SECRET):
        ana = await broker(server, users, llm, None)
        for number in ("M-1", "M-2"):
            result = await one_tool_call(
                client, ana, llm, ToolUse("lookup_listing", {"mls_number": number}, id="t1")
            )
            assert result == {"mlsNumber": number, "status": "active"}
    assert {"lookup_listing", "archive_listing"} <= set(llm.offered_tools(llm.fake.requests[0]))
    assert fake_oauth_mcp.calls == [
        ("lookup_listing", {"mls_number": "M-1"}),
        ("lookup_listing", {"mls_number": "M-2"}),
    ]
    # One token for both chats, obtained with the client credentials grant.
    assert [r["grant_type"] for r in fake_oauth_mcp.token_requests] == ["client_credentials"]
    assert fake_oauth_mcp.refused == []


async def test_a_wrong_client_secret_leaves_the_chat_without_its_tools(
    client: httpx.AsyncClient,
    server: RunningServer,
    users: UserFactory,
    llm: Llm,
    fake_oauth_mcp: FakeOAuthMcp,
) -> None:
    wrong = "cs-wrong-00000000000000000"
    name = f"Refused {llm.name}"  # a server of its own: another one's failure is logged already
    admin = await users.create("super_admin")
    async with stored_oauth(server.app.state.mcp.stored, fake_oauth_mcp, admin.id, name, wrong):
        ana = await broker(server, users, llm, None)
        llm.fake.script(Reply(text="Hello."))
        with capture_logs() as logs:
            _, events = await stream_chat(client, ana, {"message": "hi", "provider": llm.name})
    assert types(events) == ["message_start", "content_delta", "message_complete"]
    assert llm.offered_tools(llm.fake.requests[0]) == []
    lines = [e for e in logs if "MCP server" in e["event"]]
    assert [(e["event"], e["server"], e["error"]) for e in lines] == [
        (
            "MCP server unavailable; offering none of its tools",
            name,
            "HTTP 401 Unauthorized: client authentication failed",
        )
    ]
    assert wrong not in repr(logs)
    assert fake_oauth_mcp.refused == [(401, "invalid_client")]
