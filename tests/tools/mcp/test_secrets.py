"""No stored credential comes back through a remote answer: a host that echoes every header it
receives (tests/fakes/mcp_echo.py) is configured with each kind of credential in turn, and its
echo is read through the status API, the connection test, a chat's tool error and the log."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import httpx
import pytest
from structlog.testing import capture_logs

from controlcenter.common.secrets import MASK, REMOTE_TEXT_CHARS, remote_text
from controlcenter.tools.base import ToolContext, ToolError
from controlcenter.tools.mcp.source import McpSource
from controlcenter.tools.mcp.store import McpServerStore, OAuthChanges
from tests.chat.helpers import set_settings
from tests.conftest import AppUser, RunningServer, UserFactory
from tests.fakes.mcp_echo import FakeEchoMcp

BEARER = "mcp-bearer-SECRETPLAIN-0123456789"
HEADER = "hdr-SECRETPLAIN-abcdef012345"
CLIENT_SECRET = "oauth-SECRETPLAIN-9876543210"
PROVIDER_KEY = "anthropic-SECRETPLAIN-5555"
CRM_KEY = "crm-SECRETPLAIN-77777777"


@dataclass(frozen=True)
class Kind:
    """One kind of credential: how the server is stored, and the secret that must not show."""

    secret: str
    bearer: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    oauth: bool = False
    settings: dict[str, str] = field(default_factory=dict)


KINDS = {
    "bearer token": Kind(BEARER, bearer=BEARER),
    "custom header": Kind(HEADER, headers={"X-Api-Key": HEADER}),
    "oauth client secret": Kind(CLIENT_SECRET, oauth=True),
    "provider key": Kind(PROVIDER_KEY, settings={"providerAApiKey": PROVIDER_KEY}),
    "crm key": Kind(CRM_KEY, settings={"crmPrivateToken": CRM_KEY}),
}


@pytest.fixture
async def admin(users: UserFactory) -> AppUser:
    return await users.create("super_admin")


@pytest.fixture
async def store(server: RunningServer) -> AsyncIterator[McpServerStore]:
    source: McpSource = server.app.state.mcp
    assert isinstance(source.stored, McpServerStore)
    yield source.stored
    source.stored.forget()  # the tables are emptied behind its back


async def configure(
    kind: Kind,
    fake: FakeEchoMcp,
    server: RunningServer,
    store: McpServerStore,
    admin: AppUser,
) -> None:
    """The echoing host stored as `Echo` with `kind`'s credential."""
    oauth = OAuthChanges("echo-client", CLIENT_SECRET, fake.base) if kind.oauth else OAuthChanges()
    await store.create(
        name="Echo",
        url=fake.url,
        enabled=True,
        bearer_token=kind.bearer,
        headers=kind.headers,
        user_id=admin.id,
        oauth=oauth,
    )
    if kind.settings:
        await set_settings(server, kind.settings, admin)
        fake.also = " ".join(kind.settings.values())  # a host that learnt the key somehow


def assert_clean(text: str, kind: Kind) -> None:
    assert "echo" in text  # the remote's words are shown...
    assert kind.secret not in text  # ...without the credential
    assert "SECRETPLAIN" not in text


@pytest.mark.parametrize("name", list(KINDS))
async def test_the_status_and_the_connection_test_carry_no_stored_secret(
    name: str,
    client: httpx.AsyncClient,
    server: RunningServer,
    store: McpServerStore,
    admin: AppUser,
    fake_echo_mcp: FakeEchoMcp,
) -> None:
    kind = KINDS[name]
    await configure(kind, fake_echo_mcp, server, store, admin)
    with capture_logs() as logs:
        status = await client.get("/api/v1/admin/mcp-servers/status", headers=admin.headers)
        tested = await client.post("/api/v1/admin/integrations/mcp/test", headers=admin.headers)
    assert status.status_code == 200, status.text
    [state] = status.json()["servers"]
    assert state["state"] == "failing"
    assert_clean(state["detail"], kind)
    assert len(state["detail"]) <= REMOTE_TEXT_CHARS
    assert tested.status_code == 200
    assert_clean(tested.json()["detail"], kind)
    assert kind.secret not in repr(logs)
    # The host did receive it: what was removed was really there.
    assert any(kind.secret in repr(headers) for _, headers in fake_echo_mcp.seen) or (
        kind.settings or kind.oauth
    )


@pytest.mark.parametrize("name", list(KINDS))
async def test_a_chats_listing_log_and_tool_error_carry_no_stored_secret(
    name: str,
    server: RunningServer,
    store: McpServerStore,
    admin: AppUser,
    fake_echo_mcp: FakeEchoMcp,
) -> None:
    kind = KINDS[name]
    await configure(kind, fake_echo_mcp, server, store, admin)
    # A source of its own: the app's keeps failures for its TTL and logs each one once.
    source = McpSource(_no_setting, ttl_s=60, timeout_s=5, stored=store)
    settings = {"mcpServerUrl": "", **kind.settings}
    try:
        with capture_logs() as logs:
            assert await source.list_tools(settings) == ()
            context = ToolContext(user_id=admin.id, crm=None, settings=settings)
            with pytest.raises(ToolError) as caught:
                await source.call_tool("Echo", "lookup", {}, context)
    finally:
        await source.aclose()
    warnings = [
        e for e in logs if e["event"] == "MCP server unavailable; offering none of its tools"
    ]
    assert len(warnings) == 1
    assert_clean(warnings[0]["error"], kind)
    assert_clean(str(caught.value), kind)
    assert kind.secret not in repr(logs)


async def _no_setting() -> str | None:
    return None


def test_remote_text_removes_each_form_of_a_secret_and_cuts_after() -> None:
    secret = 'se"cr/et-0123456789'
    encoded = secret.replace("/", "%2F").replace('"', "%22")
    text = f'{secret} {encoded} {{"k": "se\\"cr/et-0123456789"}}'
    cleaned = remote_text(text, [secret])
    assert "cr/et" not in cleaned and "cr%2Fet" not in cleaned
    assert cleaned.count(MASK) == 3
    # The cut comes after the removal: a secret across the cut is never half shown.
    long = "x" * (REMOTE_TEXT_CHARS - 5) + secret
    cut = remote_text(long, [secret])
    assert len(cut) <= REMOTE_TEXT_CHARS and "0123" not in cut and 'se"c' not in cut
    assert remote_text("Basic b3BlcmF0b3I6cGE1NXcwcmQ=", []) == f"Basic {MASK}"


def test_a_short_secret_is_removed_where_it_stands_alone() -> None:
    text = "HTTP 401 Unauthorized: echo x-debug=1; x-key=k9"
    assert (
        remote_text(text, ["1", "k9"])
        == f"HTTP 401 Unauthorized: echo x-debug={MASK}; x-key={MASK}"
    )
