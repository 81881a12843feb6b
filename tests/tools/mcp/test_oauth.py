"""MCP servers that require OAuth, reached with client credentials through the `mcp` SDK's
provider, against the SDK's own server pieces on 127.0.0.1 (tests/fakes/oauth_mcp.py)."""

from __future__ import annotations

import base64
from collections.abc import Sequence
from typing import Any

import httpx
import pytest
from structlog.testing import capture_logs

from controlcenter.llm.types import ToolInvocation
from controlcenter.tools.mcp.oauth import MemoryTokens
from controlcenter.tools.mcp.server import McpServer, OAuthClient
from controlcenter.tools.mcp.source import McpSource
from controlcenter.tools.mcp.status import server_states
from controlcenter.tools.router import ToolRouter
from tests.fakes.clock import ManualClock
from tests.fakes.oauth_mcp import CLIENT_ID, CLIENT_SECRET, SCOPES, TOKEN_PATH, FakeOAuthMcp
from tests.tools.mcp.test_servers import Servers, context

WRONG_SECRET = "cs-wrong-00000000000000000"
NEW_SECRET = "cs-new-111111111111111111"


def oauth_server(fake: FakeOAuthMcp, **credentials: str) -> McpServer:
    fields = {"client_id": CLIENT_ID, "client_secret": CLIENT_SECRET, "issuer": fake.issuer}
    fields.update(credentials)
    return McpServer(name="Listings", url=fake.url, oauth=OAuthClient(**fields))


def source(stored: Servers, ttl_s: float = 30.0) -> McpSource:
    async def server_url() -> str | None:
        return None

    return McpSource(server_url, ttl_s=ttl_s, timeout_s=5.0, stored=stored)


def basic(client_id: str, secret: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{client_id}:{secret}".encode()).decode()}


async def test_the_fake_follows_the_oauth_rules(fake_oauth_mcp: FakeOAuthMcp) -> None:
    token_url = fake_oauth_mcp.server.url + TOKEN_PATH
    grant = {"grant_type": "client_credentials"}
    right = basic(CLIENT_ID, CLIENT_SECRET)
    async with httpx.AsyncClient() as http:
        unauthorized = await http.post(
            fake_oauth_mcp.url,
            json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}},
            headers={"Accept": "application/json, text/event-stream"},
        )
        challenge = unauthorized.headers["www-authenticate"]
        metadata_url = challenge.split('resource_metadata="')[1].split('"')[0]
        resource = (await http.get(metadata_url)).json()
        issuer = resource["authorization_servers"][0].rstrip("/")
        well_known = fake_oauth_mcp.server.url + "/.well-known/oauth-authorization-server/oauth"
        server_metadata = (await http.get(well_known)).json()

        async def refused(**request: Any) -> tuple[int, str, httpx.Headers]:
            answer = await http.post(token_url, **request)
            return answer.status_code, answer.json()["error"], answer.headers

        no_client = await refused(data=grant)
        wrong = await refused(data=grant, headers=basic(CLIENT_ID, WRONG_SECRET))
        wrong_post = await refused(
            data=grant | {"client_id": CLIENT_ID, "client_secret": WRONG_SECRET}
        )
        twice = await refused(data=grant | {"client_secret": CLIENT_SECRET}, headers=right)
        not_a_form = await refused(json=grant, headers=right)
        no_grant = await refused(data={"scope": SCOPES[0]}, headers=right)
        password = await refused(data={"grant_type": "password"}, headers=right)
        scope = await refused(data=grant | {"scope": "admin"}, headers=right)
        target = await refused(data=grant | {"resource": "http://127.0.0.1:9/x"}, headers=right)
        issued = await http.post(token_url, data=grant, headers=right)
    assert unauthorized.status_code == 401
    assert resource["resource"].rstrip("/") == fake_oauth_mcp.url
    assert issuer == fake_oauth_mcp.issuer
    assert server_metadata["issuer"] == fake_oauth_mcp.issuer
    assert server_metadata["token_endpoint"] == token_url
    assert server_metadata["grant_types_supported"] == ["client_credentials"]
    assert no_client[:2] == (401, "invalid_client")
    assert wrong[:2] == (401, "invalid_client")
    assert wrong[2]["www-authenticate"].startswith("Basic")
    assert wrong_post[:2] == (401, "invalid_client")
    assert "www-authenticate" not in wrong_post[2]
    assert twice[:2] == (400, "invalid_request")
    assert not_a_form[:2] == (400, "invalid_request")
    assert no_grant[:2] == (400, "invalid_request")
    assert password[:2] == (400, "unsupported_grant_type")
    assert scope[:2] == (400, "invalid_scope")
    assert target[:2] == (400, "invalid_target")
    assert issued.status_code == 200
    assert issued.headers["cache-control"] == "no-store"
    body = issued.json()
    assert body["token_type"] == "Bearer"
    assert "refresh_token" not in body
    assert body["scope"] == " ".join(SCOPES)


async def test_tools_are_listed_and_called_with_a_token_from_client_credentials(
    fake_oauth_mcp: FakeOAuthMcp,
) -> None:
    mcp = source(Servers(oauth_server(fake_oauth_mcp)))
    try:
        tools = await mcp.list_tools({})
        box = await ToolRouter([mcp]).toolbox({})
        done = await box.execute(
            ToolInvocation("c1", "lookup_listing", {"mls_number": "M1"}), context(None)
        )
    finally:
        await mcp.aclose()
    assert sorted(t.name for t in tools) == ["archive_listing", "lookup_listing"]
    assert done.success is True
    assert done.result == {"mlsNumber": "M1", "status": "active"}
    assert fake_oauth_mcp.calls == [("lookup_listing", {"mls_number": "M1"})]
    # One token request: the grant, for this server (RFC 8707), the scope it advertises.
    assert fake_oauth_mcp.token_requests == [
        {"grant_type": "client_credentials", "resource": fake_oauth_mcp.url, "scope": SCOPES[0]}
    ]
    assert fake_oauth_mcp.refused == []


async def test_the_token_serves_later_lists_and_calls_and_is_renewed_when_refused(
    fake_oauth_mcp: FakeOAuthMcp,
) -> None:
    mcp = source(Servers(oauth_server(fake_oauth_mcp)), ttl_s=0.0)
    call = ToolInvocation("c1", "archive_listing", {"mls_number": "M2"})
    try:
        for _ in range(3):
            box = await ToolRouter([mcp]).toolbox({})
            assert (await box.execute(call, context(None))).success is True
        kept = len(fake_oauth_mcp.token_requests)
        fake_oauth_mcp.issued.clear()  # the server no longer accepts the token: 401
        renewed = await mcp.list_tools({})
    finally:
        await mcp.aclose()
    assert kept == 1
    assert len(renewed) == 2
    assert len(fake_oauth_mcp.token_requests) == 2
    assert len(fake_oauth_mcp.calls) == 3


async def test_a_changed_configuration_drops_the_token(fake_oauth_mcp: FakeOAuthMcp) -> None:
    stored = Servers(oauth_server(fake_oauth_mcp))
    mcp = source(stored)
    try:
        await mcp.list_tools({})
        await mcp.list_tools({})
        # The operator stores a new secret: the token the old one got (still valid) is dropped.
        fake_oauth_mcp.clients[CLIENT_ID] = NEW_SECRET
        stored.servers = [oauth_server(fake_oauth_mcp, client_secret=NEW_SECRET)]
        tools = await mcp.list_tools({})
    finally:
        await mcp.aclose()
    assert len(tools) == 2
    assert len(fake_oauth_mcp.token_requests) == 2
    assert fake_oauth_mcp.refused == []
    assert len(fake_oauth_mcp.issued) == 2


async def test_a_removed_server_drops_its_token(fake_oauth_mcp: FakeOAuthMcp) -> None:
    """Deleted (or disabled), a server's provider goes with its token: the same server
    stored again gets a token of its own."""
    stored = Servers(oauth_server(fake_oauth_mcp))
    mcp = source(stored, ttl_s=0.0)
    try:
        await mcp.list_tools({})
        stored.servers = []
        assert await mcp.list_tools({}) == ()
        stored.servers = [oauth_server(fake_oauth_mcp)]
        tools = await mcp.list_tools({})
    finally:
        await mcp.aclose()
    assert len(tools) == 2
    assert len(fake_oauth_mcp.token_requests) == 2
    assert fake_oauth_mcp.refused == []


class _Unreadable(Servers):
    """Stored servers whose read fails while `failing` is set."""

    failing = False

    async def enabled(self) -> Sequence[McpServer]:
        if self.failing:
            raise RuntimeError("database unavailable")
        return await super().enabled()


async def test_a_failed_read_of_the_servers_keeps_their_tokens(
    fake_oauth_mcp: FakeOAuthMcp,
) -> None:
    stored = _Unreadable(oauth_server(fake_oauth_mcp))
    mcp = source(stored, ttl_s=0.0)
    try:
        await mcp.list_tools({})
        stored.failing = True
        assert await mcp.list_tools({}) == ()
        stored.failing = False
        tools = await mcp.list_tools({})
    finally:
        await mcp.aclose()
    assert len(tools) == 2
    assert len(fake_oauth_mcp.token_requests) == 1  # the first token still serves


async def test_a_wrong_secret_offers_no_tools_and_is_logged_once(
    fake_oauth_mcp: FakeOAuthMcp,
) -> None:
    stored = Servers(oauth_server(fake_oauth_mcp, client_secret=WRONG_SECRET))
    mcp = source(stored, ttl_s=0.0)
    try:
        with capture_logs() as logs:
            first = await mcp.list_tools({})
            again = await mcp.list_tools({})
            [state] = await server_states(mcp, {}, timeout_s=5)
    finally:
        await mcp.aclose()
    assert first == again == ()
    lines = [e for e in logs if "MCP server" in e["event"]]
    assert [(e["event"], e["log_level"]) for e in lines] == [
        ("MCP server unavailable; offering none of its tools", "warning")
    ]
    refusal = "HTTP 401 Unauthorized: client authentication failed"
    assert lines[0]["error"] == refusal
    assert (state.state, state.ok, state.detail) == ("failing", False, refusal)
    assert WRONG_SECRET not in repr(logs)
    assert {status for status, _ in fake_oauth_mcp.refused} == {401}
    assert fake_oauth_mcp.issued == {}


async def test_credentials_go_only_to_the_issuer_configured(fake_oauth_mcp: FakeOAuthMcp) -> None:
    """The MCP server names its authorization server; one that is not the configured issuer
    never receives the client's credentials."""
    elsewhere = "https://auth.example.com/oauth"
    mcp = source(Servers(oauth_server(fake_oauth_mcp, issuer=elsewhere)))
    try:
        [state] = await server_states(mcp, {}, timeout_s=5)
    finally:
        await mcp.aclose()
    assert (state.state, state.detail) == (
        "failing",
        "OAuth failed: Authorization server metadata issuer mismatch: <address> != <address>",
    )
    assert fake_oauth_mcp.token_requests == []
    assert CLIENT_SECRET not in state.detail


def test_a_servers_repr_shows_no_client_secret(fake_oauth_mcp: FakeOAuthMcp) -> None:
    server = oauth_server(fake_oauth_mcp)
    assert CLIENT_SECRET not in repr(server)
    assert server.oauth is not None
    assert CLIENT_SECRET not in repr(server.oauth)
    assert CLIENT_ID in repr(server.oauth)


@pytest.mark.parametrize(
    ("credentials", "problem"),
    [
        ({"client_secret": "sécret"}, "its OAuth client secret cannot be sent"),
        ({"client_id": ""}, "its OAuth client id cannot be sent"),
        ({"issuer": "ftp://auth.example.com"}, "its OAuth issuer cannot be used"),
    ],
)
def test_unusable_credentials_are_named_not_sent(
    fake_oauth_mcp: FakeOAuthMcp, credentials: dict[str, str], problem: str
) -> None:
    found = oauth_server(fake_oauth_mcp, **credentials).problem()
    assert found is not None and found.startswith(problem)


async def test_stored_tokens_are_not_handed_out_once_expired() -> None:
    from mcp.shared.auth import OAuthToken

    clock = ManualClock()
    tokens = MemoryTokens(clock)
    await tokens.set_tokens(OAuthToken(access_token="at-1", expires_in=60))
    clock.advance(59)
    kept = await tokens.get_tokens()
    clock.advance(1)
    assert kept is not None and kept.access_token == "at-1"
    assert await tokens.get_tokens() is None
    await tokens.set_tokens(OAuthToken(access_token="at-2"))  # no expiry given: kept
    clock.advance(10**6)
    assert (await tokens.get_tokens()) == OAuthToken(access_token="at-2")
