"""/admin/users and /account in the browser, against the users and tokens API."""

from __future__ import annotations

import re

import httpx
from playwright.async_api import expect

from tests.browser.conftest import Browsing
from tests.conftest import UserFactory


async def test_an_admin_creates_a_user_links_crm_and_disables_them(
    browsing: Browsing, users: UserFactory
) -> None:
    admin = await users.create("super_admin")
    page = await browsing.page(admin)
    page.on("dialog", lambda dialog: dialog.accept())
    await page.goto("/admin/users")
    table = page.locator("#users-body")
    await expect(table.locator("tr")).to_have_count(1)

    # Too short a password: the endpoint's message, nothing created.
    form = page.locator("#create-user")
    await form.get_by_label("Email").fill("new.broker@example.com")
    await form.get_by_label("Name").fill("New Broker")
    await form.get_by_label("Password").fill("short")
    await page.get_by_role("button", name="Create user").click()
    await expect(page.locator("#error-password")).to_be_visible()  # beside the password
    await expect(table.locator("tr")).to_have_count(1)

    await form.get_by_label("Password").fill("")
    await page.get_by_role("button", name="Create user").click()
    notice = page.locator("#users-status")
    await expect(notice).to_contain_text("Created new.broker@example.com")
    await expect(page.locator("#error-password")).to_be_hidden()  # gone with the next action
    password = await page.locator("#one-time-password-value").text_content() or ""
    assert len(password) >= 12
    row = table.locator("tr", has_text="new.broker@example.com")
    await expect(row).to_contain_text("Active")

    await row.get_by_label("CRM location of new.broker@example.com", exact=True).fill(
        "locBroker000001"
    )
    await row.get_by_role("button", name="Link CRM location of new.broker@example.com").click()
    await expect(notice).to_contain_text("linked to locBroker000001")

    # The generated password signs in, until the account is disabled.
    async with httpx.AsyncClient(base_url=browsing.server.url) as http:
        body = {"email": "new.broker@example.com", "password": password}
        assert (await http.post("/api/v1/auth/login", json=body)).status_code == 200
        row = table.locator("tr", has_text="new.broker@example.com")
        await row.get_by_role("button", name="Disable new.broker@example.com").click()
        await expect(row.locator(".status-cell")).to_have_text("Disabled")
        assert (await http.post("/api/v1/auth/login", json=body)).status_code == 401

    row = table.locator("tr", has_text="new.broker@example.com")
    await row.get_by_label("Role of new.broker@example.com").select_option("admin")
    await expect(notice).to_contain_text("is now Administrator")

    await page.reload()
    row = table.locator("tr", has_text="new.broker@example.com")
    await expect(row.locator(".status-cell")).to_have_text("Disabled")
    await expect(row.get_by_label("Role of new.broker@example.com")).to_have_value("admin")
    await expect(
        row.get_by_label("CRM location of new.broker@example.com", exact=True)
    ).to_have_value("locBroker000001")

    await row.get_by_role("button", name="Reset password of new.broker@example.com").click()
    await expect(page.locator("#one-time-password")).to_contain_text(
        "New password for new.broker@example.com"
    )
    await row.get_by_role("button", name="Delete new.broker@example.com").click()
    await expect(table.locator("tr", has_text="new.broker@example.com")).to_have_count(0)


async def test_the_last_super_admin_cannot_demote_themself(
    browsing: Browsing, users: UserFactory
) -> None:
    admin = await users.create("super_admin")
    page = await browsing.page(admin)
    await page.goto("/admin/users")
    role = page.get_by_label(f"Role of {admin.email}")
    await role.select_option("user")
    # The refusal stands beside the role it concerns.
    await expect(role).to_have_accessible_description(re.compile(f"{admin.email} was not changed"))
    await expect(role).to_have_value("super_admin")


async def test_account_tokens_and_password(browsing: Browsing, users: UserFactory) -> None:
    user = await users.create()
    page = await browsing.page(user)
    page.on("dialog", lambda dialog: dialog.accept())
    await page.goto("/account")
    await page.get_by_label("Label").fill("Nextcloud dashboard")
    await page.get_by_role("button", name="Create token").click()
    secret = page.locator("#new-token-value")
    await expect(secret).not_to_be_empty()
    token = await secret.text_content()
    tokens = page.locator("#tokens-body tr", has_text="Nextcloud dashboard")
    await expect(tokens).to_have_count(1)
    async with httpx.AsyncClient(base_url=browsing.server.url) as http:
        me = await http.get("/api/v1/auth/me", headers={"Authorization": f"Bearer {token}"})
        assert me.status_code == 200

        await page.reload()
        await expect(page.locator("#new-token")).to_be_hidden()  # shown once
        await page.get_by_role("button", name="Revoke Nextcloud dashboard").click()
        await expect(tokens).to_have_count(0)
        me = await http.get("/api/v1/auth/me", headers={"Authorization": f"Bearer {token}"})
        assert me.status_code == 401

    await page.get_by_label("Current password").fill("not my password")
    await page.get_by_label("New password").fill("a-new-password-1234")
    await page.get_by_role("button", name="Change password").click()
    # Beside the field it concerns, not under the new password.
    await expect(page.locator("#error-currentPassword")).to_contain_text("incorrect")
    await expect(page.locator("#error-newPassword")).to_be_hidden()
    await page.get_by_label("Current password").fill(user.password)
    await page.get_by_role("button", name="Change password").click()
    await expect(page.locator("#password-status")).to_have_text("Password changed")
    await page.goto("/chat")  # this session was kept
    assert page.url.endswith("/chat")
