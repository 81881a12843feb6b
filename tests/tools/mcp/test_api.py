"""/api/v1/admin/mcp-servers through the running service: credentials stored encrypted and
answered masked, a masked value sent back keeping the stored one, the refusals, and the
servers' states."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, cast

import httpx
import pytest
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from controlcenter.db import Database
from controlcenter.tools.mcp.models import McpServerRow
from controlcenter.tools.mcp.source import McpSource
from controlcenter.tools.mcp.store import McpServerStore, ServerChanges, StoredServer
from tests.conftest import AppUser, RunningServer, UserFactory
from tests.dbtools import reading
from tests.fakes.highlevel_mcp import TOKEN, FakeHighLevelMcp
from tests.fakes.mcp_server import FakeMcp
from tests.fakes.oauth_mcp import CLIENT_ID, CLIENT_SECRET, FakeOAuthMcp

URL = "/api/v1/admin/mcp-servers"


@pytest.fixture(autouse=True)
async def _forget_servers(server: RunningServer) -> AsyncIterator[None]:
    """The tables are emptied after each test behind the store's back: it reads them again."""
    yield
    source: McpSource = server.app.state.mcp
    assert source.stored is not None
    source.stored.forget()  # type: ignore[attr-defined]


@pytest.fixture
async def admin(users: UserFactory) -> AppUser:
    return await users.create("super_admin")


def highlevel_body(fake: FakeHighLevelMcp, **changes: Any) -> dict[str, Any]:
    return {
        "name": "HighLevel",
        "url": fake.url,
        "bearerToken": TOKEN,
        "headers": {"locationId": "{crmLocationId}", "X-Api-Key": "k-1234567890abcd"},
    } | changes


async def test_a_server_is_stored_encrypted_and_answered_masked(
    client: httpx.AsyncClient,
    server: RunningServer,
    admin: AppUser,
    fake_highlevel: FakeHighLevelMcp,
) -> None:
    created = await client.post(URL, json=highlevel_body(fake_highlevel), headers=admin.headers)
    assert created.status_code == 201, created.text
    view = created.json()["server"]
    assert view["bearerToken"] == "••••56ef"
    assert view["headers"] == {"locationId": "{crmLocationId}", "X-Api-Key": "••••abcd"}
    assert view["enabled"] is True
    listed = (await client.get(URL, headers=admin.headers)).json()["servers"]
    assert listed == [view]
    async with reading(server.db) as db:
        row = (await db.scalars(select(McpServerRow))).one()
    assert TOKEN not in row.credentials_encrypted
    assert "abcd" not in row.credentials_encrypted


async def test_masked_values_sent_back_keep_the_stored_ones(
    client: httpx.AsyncClient,
    server: RunningServer,
    admin: AppUser,
    fake_highlevel: FakeHighLevelMcp,
) -> None:
    view = (
        await client.post(URL, json=highlevel_body(fake_highlevel), headers=admin.headers)
    ).json()["server"]
    # The page sends back what GET showed, with one change.
    sent = {k: view[k] for k in ("name", "url", "bearerToken", "headers")} | {"enabled": False}
    changed = await client.patch(f"{URL}/{view['id']}", json=sent, headers=admin.headers)
    assert changed.status_code == 200, changed.text
    assert changed.json()["server"]["enabled"] is False
    [stored] = await server.app.state.mcp.stored.all()
    assert stored.server.bearer_token == TOKEN
    assert dict(stored.server.headers) == {
        "locationId": "{crmLocationId}",
        "X-Api-Key": "k-1234567890abcd",
    }
    # A header dropped from the set is gone; "" removes the token.
    cleared = await client.patch(
        f"{URL}/{view['id']}",
        json={"bearerToken": "", "headers": {"locationId": "{crmLocationId}"}},
        headers=admin.headers,
    )
    assert cleared.json()["server"]["bearerToken"] == ""
    assert cleared.json()["server"]["headers"] == {"locationId": "{crmLocationId}"}


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"url": "ftp://example.com/mcp"}, "url"),
        ({"name": " padded "}, "name"),
        ({"headers": {"Content-Type": "text/plain"}}, "headers"),
        ({"headers": {"bad header": "x"}}, "headers"),
        ({"headers": {"X-Key": "••••"}}, "headers"),  # nothing stored to keep
        ({"bearerToken": "••••56ef"}, "bearerToken"),
        ({"bearerToken": "tök"}, "bearerToken"),
        ({"enabled": "yes"}, "enabled"),
        ({"unknown": 1}, "unknown"),
        ({"oauthClientId": "id", "oauthClientSecret": "s-1"}, "oauthClientId"),  # and a token
        ({"bearerToken": "", "oauthClientId": "id"}, "oauthClientSecret"),
        ({"bearerToken": "", "oauthClientSecret": "s-1"}, "oauthClientSecret"),
        ({"bearerToken": "", "oauthIssuer": "https://auth.example.com"}, "oauthIssuer"),
        (
            {"bearerToken": "", "oauthClientId": "id", "oauthClientSecret": "••••"},
            "oauthClientSecret",
        ),
        ({"bearerToken": "", "oauthClientId": "ïd", "oauthClientSecret": "s-1"}, "oauthClientId"),
        ({"oauthIssuer": "auth.example.com"}, "oauthIssuer"),
        # A new OAuth server names its authorization server.
        ({"bearerToken": "", "oauthClientId": "id", "oauthClientSecret": "s-1"}, "oauthIssuer"),
        # What HTTP cannot carry for the server.
        ({"name": "Echo\r\nX-Injected: 1"}, "name"),
        ({"name": "Tab\there"}, "name"),
        ({"name": "Next\u0085line"}, "name"),
        ({"name": "Line\u2028break"}, "name"),
        ({"url": "http://user:pa55w0rd@example.com/mcp"}, "url"),
        ({"url": "http://token@example.com/mcp"}, "url"),
        *(
            ({"headers": {name: "v"}}, "headers")
            for name in (
                "Cookie",
                "Proxy-Authorization",
                "TE",
                "Upgrade",
                "Expect",
                "Keep-Alive",
                "Trailer",
                "connection",
            )
        ),
        ({"headers": {"X-Key": " padded"}}, "headers"),
        ({"headers": {"X-Key": "padded\t"}}, "headers"),
        ({"bearerToken": "pit-1234567890 "}, "bearerToken"),
    ],
)
async def test_invalid_bodies_are_refused_naming_the_field(
    client: httpx.AsyncClient,
    admin: AppUser,
    fake_highlevel: FakeHighLevelMcp,
    body: dict[str, Any],
    field: str,
) -> None:
    answer = await client.post(
        URL, json=highlevel_body(fake_highlevel) | body, headers=admin.headers
    )
    assert answer.status_code == 400
    assert answer.json()["error"] == "Validation failed"
    assert answer.json()["details"][0]["path"][0] == field
    assert (await client.get(URL, headers=admin.headers)).json() == {"servers": []}


async def test_names_are_unique_and_unknown_ids_are_404(
    client: httpx.AsyncClient, admin: AppUser, fake_highlevel: FakeHighLevelMcp
) -> None:
    body = highlevel_body(fake_highlevel)
    first = (await client.post(URL, json=body, headers=admin.headers)).json()["server"]
    again = await client.post(URL, json=body, headers=admin.headers)
    assert (again.status_code, again.json()) == (
        409,
        {"error": "An MCP server with this name already exists"},
    )
    reserved = await client.post(URL, json=body | {"name": "mcpServerUrl"}, headers=admin.headers)
    assert reserved.status_code == 409
    other = (await client.post(URL, json=body | {"name": "Other"}, headers=admin.headers)).json()[
        "server"
    ]
    renamed = await client.patch(
        f"{URL}/{other['id']}", json={"name": first["name"]}, headers=admin.headers
    )
    assert renamed.status_code == 409
    missing = await client.patch(f"{URL}/nope", json={"enabled": False}, headers=admin.headers)
    assert (missing.status_code, missing.json()) == (404, {"error": "MCP server not found"})
    deleted = await client.delete(f"{URL}/{first['id']}", headers=admin.headers)
    assert deleted.json() == {"success": True}
    gone = await client.delete(f"{URL}/{first['id']}", headers=admin.headers)
    assert gone.status_code == 404
    names = [s["name"] for s in (await client.get(URL, headers=admin.headers)).json()["servers"]]
    assert names == ["Other"]


async def test_a_refusal_other_than_the_name_is_not_reported_as_a_taken_name(
    server: RunningServer,
) -> None:
    """A saving user who no longer exists breaks the server's reference to its user, which is
    not a name clash."""
    store = McpServerStore(server.db, server.settings.cipher, ttl_s=30)
    with pytest.raises(IntegrityError):
        await store.create(
            name="Fresh",
            url="http://127.0.0.1:9/mcp",
            enabled=True,
            bearer_token="",
            headers={},
            user_id="no-such-user",
        )


@pytest.mark.parametrize(
    "field",
    ["name", "url", "enabled", "bearerToken", "headers", "oauthClientId", "oauthClientSecret",
     "oauthIssuer"],
)  # fmt: skip
async def test_a_change_refuses_null_and_keeps_the_server(
    client: httpx.AsyncClient, admin: AppUser, fake_highlevel: FakeHighLevelMcp, field: str
) -> None:
    stored = (
        await client.post(URL, json=highlevel_body(fake_highlevel), headers=admin.headers)
    ).json()["server"]
    answer = await client.patch(f"{URL}/{stored['id']}", json={field: None}, headers=admin.headers)
    assert answer.status_code == 400
    assert answer.json()["error"] == "Validation failed"
    assert answer.json()["details"][0]["path"][0] == field
    assert (await client.get(URL, headers=admin.headers)).json() == {"servers": [stored]}


async def test_status_is_no_server_to_change_or_remove(
    client: httpx.AsyncClient, admin: AppUser, fake_highlevel: FakeHighLevelMcp
) -> None:
    """The states' path lies beside the servers' ids and is never taken as one: any other
    method answers 405 with its own `Allow`, and touches no server."""
    await client.post(URL, json=highlevel_body(fake_highlevel), headers=admin.headers)
    before = (await client.get(URL, headers=admin.headers)).json()
    for method in ("OPTIONS", "PATCH", "DELETE", "POST", "PUT"):
        answer = await client.request(
            method, f"{URL}/status", json={"enabled": False}, headers=admin.headers
        )
        assert (answer.status_code, answer.json()) == (405, {"error": "Method not allowed"})
        assert answer.headers["allow"] == "GET", method
    assert (await client.get(URL, headers=admin.headers)).json() == before


async def test_status_lists_every_configured_server_with_its_tool_count(
    client: httpx.AsyncClient,
    server: RunningServer,
    admin: AppUser,
    fake_highlevel: FakeHighLevelMcp,
    fake_mcp: FakeMcp,
) -> None:
    values = {"mcpServerUrl": fake_mcp.url, "crmOwnerLocationId": "OWNER-1"}
    await server.db.run_write(server.settings.save, values, admin.id)
    await client.post(URL, json=highlevel_body(fake_highlevel), headers=admin.headers)
    await client.post(
        URL,
        json=highlevel_body(fake_highlevel, name="Wrong token", bearerToken="pit-wrong"),
        headers=admin.headers,
    )
    answer = await client.get(f"{URL}/status", headers=admin.headers)
    assert answer.status_code == 200
    assert answer.json() == {
        "servers": [
            {"name": "mcpServerUrl", "state": "working", "toolCount": 6, "ok": True,
             "detail": "6 tools", "warning": ""},
            {"name": "HighLevel", "state": "working", "toolCount": 21, "ok": True,
             "detail": "21 tools", "warning": ""},
            {"name": "Wrong token", "state": "failing", "toolCount": 0, "ok": False,
             "detail": "HTTP 401 Unauthorized: Invalid Private Integration token", "warning": ""},
        ]
    }  # fmt: skip
    assert {loc for _, loc, _ in fake_highlevel.calls} <= {"OWNER-1"}


async def test_chats_that_start_at_once_read_the_stored_servers_once(
    server: RunningServer,
) -> None:
    reads: list[None] = []

    class Counted(McpServerStore):
        async def all(self) -> list[StoredServer]:
            reads.append(None)
            return await super().all()

    store = Counted(server.db, server.settings.cipher, ttl_s=30)
    await asyncio.gather(*(store.enabled() for _ in range(5)))
    assert len(reads) == 1
    store.forget()
    await store.enabled()
    assert len(reads) == 2  # a change through this process is read at once


async def test_a_change_during_a_read_is_not_hidden_by_it(server: RunningServer) -> None:
    reads: list[None] = []
    reading, release = asyncio.Event(), asyncio.Event()

    class Slow(McpServerStore):
        async def all(self) -> list[StoredServer]:
            reads.append(None)
            if len(reads) == 1:
                reading.set()
                await release.wait()  # a change is saved while this read runs
            return await super().all()

    store = Slow(server.db, server.settings.cipher, ttl_s=30)
    first = asyncio.create_task(store.enabled())
    await reading.wait()
    store.forget()
    release.set()
    await first
    await store.enabled()
    assert len(reads) == 2  # the read the change overtook was not kept


async def test_the_settings_get_keeps_its_exact_shape(
    client: httpx.AsyncClient, admin: AppUser, fake_highlevel: FakeHighLevelMcp
) -> None:
    await client.post(URL, json=highlevel_body(fake_highlevel), headers=admin.headers)
    settings = (await client.get("/api/v1/admin/settings", headers=admin.headers)).json()
    assert len(settings["settings"]) == 21
    assert settings["settings"]["mcpServerUrl"] == ""


def oauth_body(fake: FakeOAuthMcp, **changes: Any) -> dict[str, Any]:
    return {
        "name": "Listings",
        "url": fake.url,
        "oauthClientId": CLIENT_ID,
        "oauthClientSecret": CLIENT_SECRET,
        "oauthIssuer": fake.issuer,
    } | changes


async def test_oauth_client_credentials_are_stored_masked_and_kept(
    client: httpx.AsyncClient,
    server: RunningServer,
    admin: AppUser,
    fake_oauth_mcp: FakeOAuthMcp,
) -> None:
    created = await client.post(URL, json=oauth_body(fake_oauth_mcp), headers=admin.headers)
    assert created.status_code == 201, created.text
    view = created.json()["server"]
    assert view["bearerToken"] == ""
    assert view["oauthClientId"] == CLIENT_ID
    assert view["oauthClientSecret"] == "••••" + CLIENT_SECRET[-4:]
    assert view["oauthIssuer"] == fake_oauth_mcp.issuer
    assert CLIENT_SECRET not in created.text
    async with reading(server.db) as db:
        row = (await db.scalars(select(McpServerRow))).one()
    assert CLIENT_SECRET not in row.credentials_encrypted
    assert CLIENT_ID not in row.credentials_encrypted
    # The page sends back what GET showed: the secret is kept.
    listed = (await client.get(URL, headers=admin.headers)).json()["servers"]
    assert listed == [view]
    sent = {k: view[k] for k in ("name", "url", "bearerToken", "headers", "oauthClientId",
                                 "oauthClientSecret", "oauthIssuer")}  # fmt: skip
    changed = await client.patch(
        f"{URL}/{view['id']}", json=sent | {"enabled": False}, headers=admin.headers
    )
    assert changed.status_code == 200, changed.text
    [stored] = await server.app.state.mcp.stored.all()
    assert stored.server.oauth is not None
    assert stored.server.oauth.client_secret == CLIENT_SECRET
    # A bearer token beside them is refused, naming it; the server is unchanged.
    both = await client.patch(
        f"{URL}/{view['id']}", json={"bearerToken": "pit-1234567890"}, headers=admin.headers
    )
    assert both.status_code == 400
    assert both.json()["error"] == "Validation failed"
    assert both.json()["details"][0]["path"] == ["bearerToken"]
    assert (
        "either a bearer token or OAuth client credentials" in both.json()["details"][0]["message"]
    )
    # Switching to a bearer token: the client id "" removes the credentials.
    switched = await client.patch(
        f"{URL}/{view['id']}",
        json={"bearerToken": "pit-1234567890", "oauthClientId": "", "oauthClientSecret": "••••"},
        headers=admin.headers,
    )
    assert switched.status_code == 200, switched.text
    after = switched.json()["server"]
    assert (after["oauthClientId"], after["oauthClientSecret"], after["oauthIssuer"]) == (
        "",
        "",
        "",
    )
    assert after["bearerToken"] == "••••7890"
    [stored] = await server.app.state.mcp.stored.all()
    assert stored.server.oauth is None


async def test_status_names_the_authorization_servers_refusal_never_the_secret(
    client: httpx.AsyncClient, admin: AppUser, fake_oauth_mcp: FakeOAuthMcp
) -> None:
    wrong = "cs-wrong-00000000000000000"
    await client.post(
        URL, json=oauth_body(fake_oauth_mcp, oauthClientSecret=wrong), headers=admin.headers
    )
    await client.post(URL, json=oauth_body(fake_oauth_mcp, name="Right"), headers=admin.headers)
    answer = await client.get(f"{URL}/status", headers=admin.headers)
    assert answer.status_code == 200
    assert answer.json() == {
        "servers": [
            {"name": "Listings", "state": "failing", "toolCount": 0, "ok": False,
             "detail": "HTTP 401 Unauthorized: client authentication failed", "warning": ""},
            {"name": "Right", "state": "working", "toolCount": 2, "ok": True,
             "detail": "2 tools", "warning": ""},
        ]
    }  # fmt: skip
    assert wrong not in answer.text and wrong[-4:] not in answer.text


class _RacedOnce:
    """The service's database, with another change made just before the first write: what
    another administrator's PATCH committed between this one's read and write."""

    def __init__(self, db: Database, race: Callable[[], Awaitable[object]]) -> None:
        self._db, self._race = db, race
        self.writes = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._db, name)

    async def run_write(self, work: Any, *args: Any, **kwargs: Any) -> Any:
        self.writes += 1
        if self.writes == 1:
            await self._race()
        return await self._db.run_write(work, *args, **kwargs)


async def test_a_patch_overtaken_by_another_keeps_the_other_change(
    server: RunningServer, admin: AppUser
) -> None:
    """The credentials are worked out between reading the row and writing it; a change
    committed in between is not undone: the PATCH is made again on the newer row."""
    store = McpServerStore(server.db, server.settings.cipher, ttl_s=30)
    created = await store.create(
        name="Raced",
        url="http://127.0.0.1:9/mcp",
        enabled=True,
        bearer_token="first-token",
        headers={},
        user_id=admin.id,
    )

    async def other_admin() -> object:
        changes = ServerChanges(bearer_token="the-other-admins-token")
        return await store.update(created.id, changes, admin.id)

    raced = _RacedOnce(server.db, other_admin)
    racing = McpServerStore(cast(Database, raced), server.settings.cipher, ttl_s=30)
    renamed = await racing.update(created.id, ServerChanges(name="Renamed"), admin.id)
    assert raced.writes == 2  # refused once (the row moved), then made on the newer row
    assert renamed.server.name == "Renamed"
    assert renamed.server.bearer_token == "the-other-admins-token"
