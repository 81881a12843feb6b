"""How the forms behave: errors beside their field and gone with the next action, a one-time
password that stays until dismissed and can be copied, a confirmed administrator grant, and
/setup's controls disabled until the saved answers have arrived."""

from __future__ import annotations

import asyncio

from playwright.async_api import Dialog, Page, Route, expect

from tests.browser.conftest import Browsing
from tests.conftest import AppUser, UserFactory


async def users_page(browsing: Browsing, users: UserFactory) -> tuple[Page, AppUser]:
    """/admin/users of a new super administrator, who may use the clipboard, and a broker."""
    admin = await users.create("super_admin")
    broker = await users.create()
    page = await browsing.page(admin)
    await page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    await page.goto("/admin/users")
    return page, broker


async def test_users_page_errors_passwords_and_the_administrator_grant(
    browsing: Browsing, users: UserFactory
) -> None:
    page, broker = await users_page(browsing, users)
    row = page.locator("#users-body tr", has_text=broker.email)
    crm = row.get_by_label(f"CRM location of {broker.email}", exact=True)

    # An unusable CRM location: the message beside that field, which is marked invalid.
    await crm.fill("not a location!")
    await row.get_by_role("button", name=f"Link CRM location of {broker.email}").click()
    error = row.locator(".crm-error")
    await expect(error).to_contain_text(f"{broker.email} was not changed")
    await expect(crm).to_have_attribute("aria-invalid", "true")
    await expect(crm).to_have_accessible_description(await error.text_content() or "")

    # The next action, a success elsewhere, takes the message away.
    dialogs: list[str] = []

    async def accept(dialog: Dialog) -> None:
        dialogs.append(dialog.message)
        await dialog.accept()

    page.on("dialog", accept)
    await row.get_by_role("button", name=f"Reset password of {broker.email}").click()
    await expect(error).to_be_hidden()
    await expect(crm).not_to_have_attribute("aria-invalid", "true")
    secret = page.locator("#one-time-password")
    await expect(secret).to_contain_text(f"New password for {broker.email}")
    password = await page.locator("#one-time-password-value").text_content()

    # Later messages do not replace it; Copy puts it on the clipboard; Dismiss hides it.
    await crm.fill("locBroker000001")
    await row.get_by_role("button", name=f"Link CRM location of {broker.email}").click()
    await expect(page.locator("#users-status")).to_contain_text("linked to locBroker000001")
    await expect(page.locator("#one-time-password-value")).to_have_text(password or "")
    await secret.get_by_role("button", name="Copy").click()
    await expect(secret.get_by_role("button", name="Copied")).to_be_visible()
    assert await page.evaluate("navigator.clipboard.readText()") == password
    await secret.get_by_role("button", name="Dismiss").click()
    await expect(secret).to_be_hidden()

    # Granting an administrator role asks first; declining changes nothing.
    page.remove_listener("dialog", accept)
    declined: list[str] = []

    async def decline(dialog: Dialog) -> None:
        declined.append(dialog.message)
        await dialog.dismiss()

    page.on("dialog", decline)
    row = page.locator("#users-body tr", has_text=broker.email)
    role = row.get_by_label(f"Role of {broker.email}")
    await role.select_option("admin")
    await expect(role).to_have_value("user")
    assert declined == [f"Make {broker.email} Administrator? They can then manage other users."]
    page.remove_listener("dialog", decline)
    page.on("dialog", accept)
    await role.select_option("admin")
    await expect(page.locator("#users-status")).to_contain_text("is now Administrator")


async def test_create_user_errors_stand_beside_their_field(
    browsing: Browsing, users: UserFactory
) -> None:
    page = await browsing.page(await users.create("super_admin"))
    await page.goto("/admin/users")
    form = page.locator("#create-user")
    await form.get_by_label("Email").fill("someone@example.com")
    await form.get_by_label("Password").fill("short")
    await page.get_by_role("button", name="Create user").click()
    await expect(form.get_by_label("Password")).to_have_attribute("aria-invalid", "true")
    await expect(page.locator("#error-password")).to_be_visible()
    await expect(page.locator("#error-email")).to_be_hidden()
    await expect(page.locator("#create-error")).to_be_hidden()


async def test_setup_is_disabled_until_the_saved_answers_arrive(
    browsing: Browsing, users: UserFactory
) -> None:
    broker = await users.create()
    page = await browsing.page(broker)
    await page.request.post(
        "/api/v1/onboarding", data={"yearsInBusiness": "7"}, headers={"Origin": browsing.server.url}
    )
    release = asyncio.Event()

    async def hold(route: Route) -> None:
        if route.request.method == "GET":
            await release.wait()
        await route.continue_()

    await page.route("**/api/v1/onboarding", hold)
    await page.goto("/setup", wait_until="domcontentloaded")
    years = page.get_by_label("Years in business")
    await expect(years).to_be_disabled()
    await expect(page.get_by_role("button", name="Save")).to_be_disabled()
    release.set()
    await expect(years).to_be_enabled()
    await expect(years).to_have_value("7")
    await expect(page.locator("#setup-form")).not_to_have_attribute("aria-busy", "true")


async def test_a_second_one_time_password_offers_copy_again(
    browsing: Browsing, users: UserFactory
) -> None:
    page, broker = await users_page(browsing, users)
    page.on("dialog", lambda dialog: asyncio.ensure_future(dialog.accept()))
    reset = page.get_by_role("button", name=f"Reset password of {broker.email}")
    secret = page.locator("#one-time-password")
    value = page.locator("#one-time-password-value")
    await reset.click()
    await expect(secret).to_be_visible()
    first = await value.text_content()
    await secret.get_by_role("button", name="Copy").click()
    await expect(secret.get_by_role("button", name="Copied")).to_be_visible()

    # Not dismissed: the next password takes its place, and its button says Copy again.
    await reset.click()
    await expect(value).not_to_have_text(first or "")
    await expect(secret.get_by_role("button", name="Copy")).to_be_visible()
