"""/setup and /admin/settings in the browser: saving, showing saved values, field errors."""

from __future__ import annotations

import json

import httpx
from playwright.async_api import Request, expect

from tests.browser.conftest import Browsing
from tests.conftest import UserFactory


async def test_setup_saves_and_shows_the_saved_values(
    browsing: Browsing, users: UserFactory
) -> None:
    user = await users.create()
    page = await browsing.page(user)
    await page.goto("/setup")
    await expect(page.locator("#setup-form")).not_to_have_attribute("aria-busy", "true")
    await page.get_by_label("Years in business").fill("12")
    await page.get_by_label("Brokerage name").fill("Harbor Commercial Realty")
    await page.get_by_label("GCI in the last 12 months").fill("250k")
    await page.get_by_label("Do you use another CRM today?").select_option(label="Yes")
    await page.get_by_label("Which CRM do you use?").fill("Follow Up Boss")
    await page.get_by_label("Do you want more leads?").select_option(label="No")
    await page.get_by_label("Pain point 1", exact=True).fill("Too many clicks")
    await page.get_by_role("button", name="Add pain point").click()
    await page.get_by_label("Pain point 2", exact=True).fill("No mobile app")
    await page.get_by_label("Channel 1", exact=True).fill("SMS")
    await page.get_by_role("button", name="Save").click()
    await expect(page.get_by_role("status")).to_have_text("Saved")

    async with httpx.AsyncClient(base_url=browsing.server.url) as http:
        saved = (await http.get("/api/v1/onboarding", headers=user.headers)).json()["onboarding"]
        me = (await http.get("/api/v1/auth/me", headers=user.headers)).json()["user"]
    assert saved["yearsInBusiness"] == "12"
    assert saved["usingOtherCrm"] is True
    assert saved["wantsMoreLeads"] is False
    assert saved["hasLeadSource"] is None  # not answered: not sent
    assert json.loads(saved["crmPainPoints"]) == ["Too many clicks", "No mobile app"]
    assert json.loads(saved["goalsSelected"]) == []
    assert me["brokerage"] == "Harbor Commercial Realty"

    await page.reload()
    await expect(page.get_by_label("Brokerage name")).to_have_value("Harbor Commercial Realty")
    await expect(page.get_by_label("Years in business")).to_have_value("12")
    await expect(page.get_by_label("Do you use another CRM today?")).to_have_value("true")
    await expect(page.get_by_label("Do you have a lead source?")).to_have_value("")
    await expect(page.get_by_label("Pain point 1", exact=True)).to_have_value("Too many clicks")
    await expect(page.get_by_label("Pain point 2", exact=True)).to_have_value("No mobile app")
    for name in ("usingOtherCrm", "crmPainPoints", "systemsToConnect", "brokerageName"):
        assert await page.locator(f"[name={name}]").count() >= 1


async def test_settings_keep_a_secret_unchanged_when_other_fields_are_saved(
    browsing: Browsing, users: UserFactory
) -> None:
    admin = await users.create("super_admin")
    store = browsing.server.settings
    page = await browsing.page(admin)
    puts: list[dict[str, str]] = []

    def record(request: Request) -> None:
        if request.method == "PUT" and request.url.endswith("/api/v1/admin/settings"):
            puts.append(json.loads(request.post_data or "{}"))

    page.on("request", record)
    await page.goto("/admin/settings")
    await expect(page.locator("#settings-form")).not_to_have_attribute("aria-busy", "true")
    secret = "sk-ant-api03-browser-secret-9876"
    await page.locator("input[name=providerAApiKey]").fill(secret)
    await page.locator("input[name=tagHighGCI]").fill("high-gci")
    await page.get_by_role("button", name="Save").click()
    await expect(page.get_by_role("status")).to_have_text("Saved")
    await expect(page.locator("input[name=providerAApiKey]")).to_have_value("••••9876")
    assert await store.get("providerAApiKey") == secret

    await page.reload()
    await expect(page.locator("input[name=providerAApiKey]")).to_have_value("••••9876")
    await page.locator("input[name=tagHighGCI]").fill("vip")
    await page.locator("input[name=notificationEmail]").fill("ops@example.com")
    await page.get_by_role("button", name="Save").click()
    await expect(page.get_by_role("status")).to_have_text("Saved")
    assert puts[-1] == {"tagHighGCI": "vip", "notificationEmail": "ops@example.com"}
    assert await store.get("providerAApiKey") == secret
    assert await store.get("tagHighGCI") == "vip"

    # A value the endpoint refuses: its message beside the field, nothing saved.
    await page.locator("input[name=notificationEmail]").fill("not-an-address")
    await page.get_by_role("button", name="Save").click()
    await expect(page.locator("#error-notificationEmail")).to_be_visible()
    assert await store.get("notificationEmail") == "ops@example.com"

    # Clear asks first, then removes that one setting.
    page.once("dialog", lambda dialog: dialog.accept())
    row = page.locator(".setting", has=page.locator("input[name=tagHighGCI]"))
    await row.get_by_role("button", name="Clear").click()
    await expect(page.get_by_role("status")).to_have_text("High-GCI tag cleared")
    await expect(page.locator("input[name=tagHighGCI]")).to_have_value("")
    assert not await store.get("tagHighGCI")
    assert await store.get("providerAApiKey") == secret
