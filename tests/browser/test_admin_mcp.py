"""/admin/mcp in the browser, against /api/v1/admin/mcp-servers and a real MCP server."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from playwright.async_api import expect

from controlcenter.tools.mcp.store import OAuthChanges
from tests.browser.conftest import PHONE, Browsing
from tests.browser.test_layout import no_horizontal_scroll
from tests.conftest import RunningServer, UserFactory
from tests.fakes.highlevel_mcp import TOKEN, FakeHighLevelMcp
from tests.fakes.mcp_echo import FakeEchoMcp
from tests.fakes.oauth_mcp import CLIENT_ID, CLIENT_SECRET, FakeOAuthMcp
from tests.tools.mcp.test_stored_before import store_row


@pytest.fixture(autouse=True)
async def _forget_servers(server: RunningServer) -> AsyncIterator[None]:
    yield
    server.app.state.mcp.stored.forget()  # the tables are emptied behind the store's back


async def test_an_operator_adds_checks_changes_and_deletes_a_server(
    browsing: Browsing, users: UserFactory, server: RunningServer, fake_highlevel: FakeHighLevelMcp
) -> None:
    admin = await users.create("super_admin")
    await server.db.run_write(server.settings.save, {"crmOwnerLocationId": "OWNER-1"}, admin.id)
    page = await browsing.page(admin)
    page.on("dialog", lambda dialog: dialog.accept())
    await page.goto("/admin/mcp")
    await expect(page.get_by_role("link", name="MCP")).to_have_attribute("aria-current", "page")
    form = page.locator("#server-form")

    # A wrong address: the API's message beside the field, nothing stored.
    await form.get_by_label("Name").fill("HighLevel")
    await form.get_by_label("Address").fill("ftp://example.com/mcp")
    await page.get_by_role("button", name="Save").click()
    await expect(page.locator("#error-url")).to_contain_text("http:// or https://")

    await form.get_by_label("Address").fill(fake_highlevel.url)
    await form.get_by_label("Bearer token").fill(TOKEN)
    await form.get_by_label("Headers").fill("locationId: {crmLocationId}")
    await page.get_by_role("button", name="Save").click()
    await expect(page.locator("#mcp-status")).to_contain_text("HighLevel saved.")
    row = page.locator("#servers-body tr", has_text="HighLevel")
    await page.get_by_role("button", name="Check servers").click()
    await expect(row).to_contain_text("working")
    await expect(row).to_contain_text("21")
    assert {location for _, location, _ in fake_highlevel.calls} <= {"OWNER-1"}

    # Editing shows the token masked; saving it back keeps the stored one.
    await row.get_by_role("button", name="Edit HighLevel").click()
    await expect(form.get_by_label("Bearer token")).to_have_value("••••56ef")
    await expect(form.get_by_label("Headers")).to_have_value("locationId: {crmLocationId}")
    await form.get_by_label("Enabled").uncheck()
    await page.get_by_role("button", name="Save").click()
    await expect(page.locator("#mcp-status")).to_contain_text("HighLevel saved.")
    [stored] = await server.app.state.mcp.stored.all()
    assert stored.server.bearer_token == TOKEN
    assert stored.enabled is False
    await expect(row).to_contain_text("disabled")

    await row.get_by_role("button", name="Delete HighLevel").click()
    await expect(page.locator("#servers-body tr", has_text="HighLevel")).to_have_count(0)


async def test_an_operator_connects_a_server_that_requires_oauth(
    browsing: Browsing, users: UserFactory, server: RunningServer, fake_oauth_mcp: FakeOAuthMcp
) -> None:
    admin = await users.create("super_admin")
    page = await browsing.page(admin)
    await page.goto("/admin/mcp")
    form = page.locator("#server-form")
    await expect(form.get_by_role("group", name="OAuth client credentials")).to_be_visible()
    await form.get_by_label("Name").fill("Listings")
    await form.get_by_label("Address").fill(fake_oauth_mcp.url)
    await form.get_by_label("OAuth client id").fill(CLIENT_ID)
    await form.get_by_label("OAuth client secret").fill(CLIENT_SECRET)
    await form.get_by_label("OAuth issuer").fill(fake_oauth_mcp.issuer)
    await page.get_by_role("button", name="Save").click()
    await expect(page.locator("#mcp-status")).to_contain_text("Listings saved.")
    row = page.locator("#servers-body tr", has_text="Listings")
    await page.get_by_role("button", name="Check servers").click()
    await expect(row).to_contain_text("working")
    await expect(row).to_contain_text("2")

    # Editing shows the secret masked; a bearer token beside it is refused beside the field.
    await row.get_by_role("button", name="Edit Listings").click()
    await expect(form.get_by_label("OAuth client id")).to_have_value(CLIENT_ID)
    await expect(form.get_by_label("OAuth client secret")).to_have_value(
        "••••" + CLIENT_SECRET[-4:]
    )
    await expect(form.get_by_label("OAuth issuer")).to_have_value(fake_oauth_mcp.issuer)
    await form.get_by_label("Bearer token").fill("pit-1234567890abcdef")
    await page.get_by_role("button", name="Save").click()
    await expect(page.locator("#error-oauthClientId")).to_contain_text("either a bearer token")
    await form.get_by_label("Bearer token").fill("")
    await page.get_by_role("button", name="Save").click()
    await expect(page.locator("#mcp-status")).to_contain_text("Listings saved.")
    [stored] = await server.app.state.mcp.stored.all()
    assert stored.server.oauth is not None
    assert stored.server.oauth.client_secret == CLIENT_SECRET
    assert stored.server.bearer_token == ""
    assert CLIENT_SECRET not in await page.content()


async def test_a_host_that_echoes_its_headers_shows_no_stored_secret(
    browsing: Browsing, users: UserFactory, server: RunningServer, fake_echo_mcp: FakeEchoMcp
) -> None:
    """The page runs the check on load: each server's refusal is shown, its credentials are
    not (a bearer token, a header value, an OAuth client secret, and the CRM key a host
    somehow learnt)."""
    admin = await users.create("super_admin")
    secrets = {
        "bearer": "mcp-bearer-SECRETPLAIN-0123456789",
        "header": "hdr-SECRETPLAIN-abcdef012345",
        "oauth": "oauth-SECRETPLAIN-9876543210",
        "crm": "crm-SECRETPLAIN-77777777",
    }
    await server.db.run_write(server.settings.save, {"crmPrivateToken": secrets["crm"]}, admin.id)
    fake_echo_mcp.also = secrets["crm"]
    store = server.app.state.mcp.stored
    common = {"url": fake_echo_mcp.url, "enabled": True, "user_id": admin.id}
    await store.create(name="Bearer", bearer_token=secrets["bearer"], headers={}, **common)
    await store.create(
        name="Header", bearer_token="", headers={"X-Key": secrets["header"]}, **common
    )
    await store.create(
        name="OAuth",
        bearer_token="",
        headers={},
        oauth=OAuthChanges("echo-client", secrets["oauth"], fake_echo_mcp.base),
        **common,
    )
    page = await browsing.page(admin)
    await page.goto("/admin/mcp")
    for name in ("Bearer", "Header", "OAuth"):
        row = page.locator("#servers-body tr", has_text=name)
        await expect(row).to_contain_text("failing: HTTP 401")
        await expect(row).to_contain_text("echo")
    content = await page.content()
    assert "SECRETPLAIN" not in content
    assert any(
        secrets["oauth"] in repr(h) or "basic" in repr(h).lower() for _, h in fake_echo_mcp.seen
    )


async def test_an_oauth_server_without_an_issuer_shows_a_warning(
    browsing: Browsing, users: UserFactory, server: RunningServer, fake_oauth_mcp: FakeOAuthMcp
) -> None:
    """A server stored before `oauthIssuer` was required works, and its row says to set it."""
    admin = await users.create("super_admin")
    oauth = {"clientId": CLIENT_ID, "clientSecret": CLIENT_SECRET, "issuer": ""}
    await store_row(
        server, "Listings", fake_oauth_mcp.url, {"bearerToken": "", "headers": [], "oauth": oauth}
    )
    page = await browsing.page(admin)
    await page.goto("/admin/mcp")
    row = page.locator("#servers-body tr", has_text="Listings")
    await expect(row).to_contain_text("working (warning: set oauthIssuer")


async def test_the_page_fits_a_phone(
    browsing: Browsing, users: UserFactory, fake_highlevel: FakeHighLevelMcp
) -> None:
    admin = await users.create("super_admin")
    page = await browsing.page(admin, PHONE)
    await page.goto("/admin/mcp")
    await page.get_by_label("Name").fill("HighLevel")
    await page.get_by_label("Address").fill(fake_highlevel.url)
    await page.get_by_role("button", name="Save").click()
    await expect(page.locator("#servers-body tr", has_text="HighLevel")).to_have_count(1)
    await no_horizontal_scroll(page)


async def test_other_roles_get_the_forbidden_page(browsing: Browsing, users: UserFactory) -> None:
    admin = await users.create("admin")
    page = await browsing.page(admin)
    response = await page.goto("/admin/mcp")
    assert response is not None and response.status == 403
