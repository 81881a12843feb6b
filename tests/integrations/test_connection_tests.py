"""`POST /api/v1/admin/integrations/{name}/test`: one real call to each loopback fake with the
stored settings; a working key, a wrong key and a missing setting for each, and never a
secret in the answer."""

from __future__ import annotations

import logging
import re

import httpx
import pytest

from controlcenter.tools.mcp.store import OAuthChanges, ServerChanges
from tests.chat.helpers import set_settings
from tests.conftest import AppUser, RunningServer, UserFactory
from tests.fakes.crm import FakeCrm
from tests.fakes.highlevel_mcp import TOKEN, TOOLS, FakeHighLevelMcp, stored_highlevel
from tests.fakes.llm import FakeAnthropic, FakeOpenAI
from tests.fakes.mcp_server import FakeMcp
from tests.fakes.oauth_mcp import CLIENT_SECRET, FakeOAuthMcp, stored_oauth

WRONG_KEY = "sk-wrong-0123456789abcdefWXYZ"


def url(name: str) -> str:
    return f"/api/v1/admin/integrations/{name}/test"


async def check(
    client: httpx.AsyncClient, admin: AppUser, name: str, *secrets: str
) -> tuple[bool, str]:
    answer = await client.post(url(name), headers=admin.headers)
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert set(body) == {"ok", "detail"}
    for secret in secrets:
        assert secret not in answer.text
        assert secret[-4:] not in answer.text  # not even the end OpenAI quotes back
    return body["ok"], body["detail"]


@pytest.fixture
async def admin(users: UserFactory) -> AppUser:
    return await users.create("super_admin")


async def test_anthropic(
    client: httpx.AsyncClient,
    server: RunningServer,
    admin: AppUser,
    fake_anthropic: FakeAnthropic,
) -> None:
    assert await check(client, admin, "provider_a") == (False, "providerAApiKey is not set")
    await set_settings(server, {"providerAApiKey": WRONG_KEY}, admin)
    ok, detail = await check(client, admin, "provider_a", WRONG_KEY)
    assert (ok, detail) == (False, "Refused: 401 invalid x-api-key")
    await set_settings(server, {"providerAApiKey": fake_anthropic.api_key}, admin)
    ok, detail = await check(client, admin, "provider_a", fake_anthropic.api_key)
    assert (ok, detail) == (True, "Key accepted: 1 model listed")
    assert fake_anthropic.invalid == []  # the SDK's request met every rule of the API


async def test_openai(
    client: httpx.AsyncClient, server: RunningServer, admin: AppUser, fake_openai: FakeOpenAI
) -> None:
    assert await check(client, admin, "provider_b") == (False, "providerBApiKey is not set")
    await set_settings(server, {"providerBApiKey": WRONG_KEY}, admin)
    ok, detail = await check(client, admin, "provider_b", WRONG_KEY)
    assert not ok
    assert detail.startswith("Refused: 401 Incorrect API key provided: ")
    await set_settings(server, {"providerBApiKey": fake_openai.api_key}, admin)
    ok, detail = await check(client, admin, "provider_b", fake_openai.api_key)
    assert (ok, detail) == (True, "Key accepted: 1 model listed")
    fake_openai.models.add("gpt-5.5-mini")
    try:
        ok, detail = await check(client, admin, "provider_b", fake_openai.api_key)
    finally:
        fake_openai.models.discard("gpt-5.5-mini")
    assert (ok, detail) == (True, "Key accepted: 2 models listed")


async def test_crm(
    client: httpx.AsyncClient, server: RunningServer, admin: AppUser, fake_crm: FakeCrm
) -> None:
    location = str(fake_crm.add_location(name="Operator HQ")["id"])
    token = fake_crm.private_token(location)
    assert await check(client, admin, "crm") == (
        False,
        "crmPrivateToken and crmOwnerLocationId are not set",
    )
    await set_settings(server, {"crmPrivateToken": token}, admin)
    assert await check(client, admin, "crm", token) == (False, "crmOwnerLocationId is not set")
    wrong = "pit-" + "0" * 32
    await set_settings(server, {"crmPrivateToken": wrong, "crmOwnerLocationId": location}, admin)
    assert await check(client, admin, "crm", wrong) == (False, "Refused: 401 Invalid JWT")
    await set_settings(server, {"crmPrivateToken": token}, admin)
    assert await check(client, admin, "crm", token) == (True, "Location Operator HQ reached")
    # The call was the documented one: the location itself, with the private token.
    call = fake_crm.calls[-1]
    assert (call.method, call.path) == ("GET", f"/locations/{location}")


async def test_mcp(
    client: httpx.AsyncClient, server: RunningServer, admin: AppUser, fake_mcp: FakeMcp
) -> None:
    none = "mcpServerUrl is not set and no MCP server is configured"
    assert await check(client, admin, "mcp") == (False, none)
    await set_settings(server, {"mcpServerUrl": fake_mcp.url + "-wrong"}, admin)
    ok, detail = await check(client, admin, "mcp")
    assert not ok
    assert detail.startswith("mcpServerUrl: ") and "Not Found" in detail, detail
    await set_settings(server, {"mcpServerUrl": fake_mcp.url}, admin)
    ok, detail = await check(client, admin, "mcp")
    assert ok, detail
    assert re.fullmatch(r"mcpServerUrl: [1-9][0-9]* tools", detail), detail


async def test_mcp_server_behind_a_token(
    client: httpx.AsyncClient,
    server: RunningServer,
    admin: AppUser,
    fake_highlevel: FakeHighLevelMcp,
) -> None:
    """A stored server that needs a token and the broker's location: checked with the
    operator's own location; a wrong token is named by its status, never quoted."""
    store = server.app.state.mcp.stored
    async with stored_highlevel(store, fake_highlevel, admin.id, bearer_token=WRONG_KEY) as created:
        ok, detail = await check(client, admin, "mcp", WRONG_KEY)
        assert not ok
        assert detail.startswith("HighLevel: its headers need a CRM location"), detail
        await set_settings(server, {"crmOwnerLocationId": "LOC-OWNER"}, admin)
        ok, detail = await check(client, admin, "mcp", WRONG_KEY)
        assert not ok
        assert detail.startswith("HighLevel: ") and "401" in detail, detail
        await store.update(created.id, ServerChanges(bearer_token=TOKEN), admin.id)
        assert await check(client, admin, "mcp", TOKEN) == (True, f"HighLevel: {len(TOOLS)} tools")


async def test_mcp_server_behind_oauth(
    client: httpx.AsyncClient,
    server: RunningServer,
    admin: AppUser,
    fake_oauth_mcp: FakeOAuthMcp,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A stored server that requires OAuth: a wrong client secret is answered with the
    authorization server's refusal, never the secret, in the test and in the servers' states."""
    store = server.app.state.mcp.stored
    refusal = "Listings: HTTP 401 Unauthorized: client authentication failed"
    async with stored_oauth(store, fake_oauth_mcp, admin.id, "Listings", WRONG_KEY) as created:
        with caplog.at_level(logging.DEBUG):
            assert await check(client, admin, "mcp", WRONG_KEY) == (False, refusal)
        states = await client.get("/api/v1/admin/mcp-servers/status", headers=admin.headers)
        assert states.json()["servers"] == [
            {"name": "Listings", "state": "failing", "toolCount": 0, "ok": False,
             "detail": refusal.removeprefix("Listings: "), "warning": ""}
        ]  # fmt: skip
        assert WRONG_KEY not in states.text and WRONG_KEY[-4:] not in states.text
        await store.update(
            created.id, ServerChanges(oauth=OAuthChanges(client_secret=CLIENT_SECRET)), admin.id
        )
        assert await check(client, admin, "mcp", CLIENT_SECRET) == (True, "Listings: 2 tools")
    # The SDK's OAuth flow does not log each failure beside the service's own line.
    assert [r for r in caplog.records if r.name.startswith("mcp.client.auth")] == []
    # Nor does its HTTP client log each request with its address (kept for DEBUG).
    assert [r for r in caplog.records if r.name.startswith(("httpx2", "httpcore2"))] == []
    assert WRONG_KEY not in caplog.text
    assert fake_oauth_mcp.refused == [(401, "invalid_client"), (401, "invalid_client")]


async def test_an_unusable_credential_is_named_not_sent(
    client: httpx.AsyncClient, server: RunningServer, admin: AppUser
) -> None:
    await set_settings(server, {"providerAApiKey": "key with ünicode"}, admin)
    ok, detail = await check(client, admin, "provider_a", "key with ünicode")
    assert not ok
    assert detail.startswith("Configuration error: the setting providerAApiKey cannot be used")


async def test_unknown_integration_and_other_roles(
    client: httpx.AsyncClient, users: UserFactory, admin: AppUser
) -> None:
    answer = await client.post(url("stripe"), headers=admin.headers)
    assert (answer.status_code, answer.json()) == (404, {"error": "Unknown integration"})
    for role in ("user", "admin"):
        other = await users.create(role)
        answer = await client.post(url("provider_a"), headers=other.headers)
        assert (answer.status_code, answer.json()) == (403, {"error": "Forbidden"})
