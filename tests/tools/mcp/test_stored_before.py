"""Servers stored before today's rules: an address with a password is never shown nor sent, and
an OAuth server without `oauthIssuer` keeps working, with a warning, until its credentials
change (then the issuer is required, and a named issuer is never removed)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from controlcenter.tools.mcp.models import McpServerRow
from controlcenter.tools.mcp.source import McpSource
from controlcenter.tools.mcp.status import NO_ISSUER
from tests.conftest import AppUser, RunningServer, UserFactory
from tests.dbtools import writing
from tests.fakes.mcp_echo import FakeEchoMcp
from tests.fakes.oauth_mcp import CLIENT_ID, CLIENT_SECRET, FakeOAuthMcp

URL = "/api/v1/admin/mcp-servers"
PASSWORD = "pa55w0rd-SECRETPLAIN"


@pytest.fixture(autouse=True)
async def _forget_servers(server: RunningServer) -> AsyncIterator[None]:
    yield
    source: McpSource = server.app.state.mcp
    assert source.stored is not None
    source.stored.forget()  # type: ignore[attr-defined]


@pytest.fixture
async def admin(users: UserFactory) -> AppUser:
    return await users.create("super_admin")


async def store_row(server: RunningServer, name: str, url: str, credentials: dict[str, Any]) -> str:
    """A row as an earlier version stored it, past today's API rules."""
    encrypted = server.settings.cipher.encrypt(json.dumps(credentials))
    row = McpServerRow(name=name, url=url, enabled=True, credentials_encrypted=encrypted)
    async with writing(server.db) as db:
        db.add(row)
    server.app.state.mcp.stored.forget()
    return row.id


async def test_an_address_with_a_password_is_masked_and_never_sent(
    client: httpx.AsyncClient, server: RunningServer, admin: AppUser, fake_echo_mcp: FakeEchoMcp
) -> None:
    address = fake_echo_mcp.url.replace("://", f"://operator:{PASSWORD}@")
    await store_row(server, "Old", address, {"bearerToken": "", "headers": []})
    listed = await client.get(URL, headers=admin.headers)
    [view] = listed.json()["servers"]
    assert view["url"] == fake_echo_mcp.url.replace("://", "://••••@")
    status = await client.get(f"{URL}/status", headers=admin.headers)
    [state] = status.json()["servers"]
    assert state["state"] == "failing"
    assert "user name or password" in state["detail"]
    for answer in (listed, status):
        assert PASSWORD not in answer.text and "operator" not in answer.text
    assert fake_echo_mcp.seen == []  # the configuration error stops it before any request


async def test_an_oauth_server_without_an_issuer_works_with_a_warning_until_it_changes(
    client: httpx.AsyncClient, server: RunningServer, admin: AppUser, fake_oauth_mcp: FakeOAuthMcp
) -> None:
    oauth = {"clientId": CLIENT_ID, "clientSecret": CLIENT_SECRET, "issuer": ""}
    server_id = await store_row(
        server, "Listings", fake_oauth_mcp.url, {"bearerToken": "", "headers": [], "oauth": oauth}
    )
    [state] = (await client.get(f"{URL}/status", headers=admin.headers)).json()["servers"]
    assert (state["state"], state["warning"]) == ("working", NO_ISSUER)
    tested = await client.post("/api/v1/admin/integrations/mcp/test", headers=admin.headers)
    assert tested.json() == {"ok": True, "detail": f"Listings: 2 tools (warning: {NO_ISSUER})"}

    # The form sent back as GET shows it (to disable it, say) keeps working.
    [view] = (await client.get(URL, headers=admin.headers)).json()["servers"]
    sent = {k: view[k] for k in ("name", "url", "oauthClientId", "oauthClientSecret")}
    kept = await client.patch(
        f"{URL}/{server_id}", json=sent | {"enabled": False}, headers=admin.headers
    )
    assert kept.status_code == 200, kept.text
    # A new secret needs the issuer.
    refused = await client.patch(
        f"{URL}/{server_id}", json={"oauthClientSecret": "new-secret-1"}, headers=admin.headers
    )
    assert refused.status_code == 400
    assert refused.json()["details"][0]["path"] == ["oauthIssuer"]
    named = await client.patch(
        f"{URL}/{server_id}",
        json={"oauthIssuer": fake_oauth_mcp.issuer, "enabled": True},
        headers=admin.headers,
    )
    assert named.status_code == 200, named.text
    [state] = (await client.get(f"{URL}/status", headers=admin.headers)).json()["servers"]
    assert (state["state"], state["warning"]) == ("working", "")
    # Once named, it is never removed while the credentials stay.
    cleared = await client.patch(
        f"{URL}/{server_id}", json={"oauthIssuer": ""}, headers=admin.headers
    )
    assert cleared.status_code == 400
    assert cleared.json()["details"][0]["path"] == ["oauthIssuer"]
