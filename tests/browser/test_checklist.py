"""/admin/checklist and the settings' descriptions and warnings, in Chromium against the fakes."""

from __future__ import annotations

import re
from pathlib import Path

from playwright.async_api import Locator, Page, expect

from tests.browser.conftest import DESKTOP, PHONE, Browsing
from tests.browser.test_layout import photograph
from tests.chat.helpers import set_settings
from tests.conftest import UserFactory
from tests.fakes.crm import FakeCrm
from tests.fakes.llm import FakeAnthropic, FakeOpenAI
from tests.fakes.mcp_server import FakeMcp

TESTS = {"Anthropic": "provider_a", "OpenAI": "provider_b", "CRM": "crm", "MCP": "mcp"}


async def test_every_setting_explains_itself_and_warns_of_a_wrong_shape(
    browsing: Browsing, users: UserFactory, screenshot_dir: Path
) -> None:
    admin = await users.create("super_admin")
    page = await browsing.page(admin)
    await page.goto("/admin/settings")
    form = page.locator("#settings-form")
    await expect(form).not_to_have_attribute("aria-busy", "true")
    inputs = form.locator(".setting input")
    assert await inputs.count() == 21
    for index in range(21):
        described = await inputs.nth(index).get_attribute("aria-describedby") or ""
        help_id = described.split()[0]
        assert help_id.startswith("help-"), described
        text = await page.locator(f"#{help_id}").text_content() or ""
        assert len(text.strip()) > 30, (help_id, text)
    agency = page.get_by_label("Agency API key")
    await expect(agency).to_have_accessible_description(
        re.compile(r"oauth\.write.*contacts\.write")
    )

    tag = page.get_by_label("High-GCI tag")
    await tag.fill("High GCI")
    warning = page.locator("#warning-tagHighGCI")
    await expect(warning).to_have_text(
        "This does not look like a tag name as HighLevel keeps it: lower case, no space at "
        "either end."
    )
    await expect(tag).to_have_accessible_description(re.compile("does not look"))
    key = page.get_by_label("Anthropic API key (provider_a)")
    await key.fill("not-a-key")
    await expect(page.locator("#warning-providerAApiKey")).to_be_visible()
    await photograph(page, screenshot_dir, "admin-settings-warning-desktop")
    # Only a warning: the API keeps its own rules and saves it.
    await page.get_by_role("button", name="Save").click()
    await expect(page.locator("#settings-status")).to_have_text("Saved")
    await expect(warning).to_be_visible()  # still the value's shape after the reload
    await tag.fill("high-gci")
    await expect(warning).to_be_hidden()


async def open_checklist(page: Page) -> None:
    await page.goto("/chat")
    await page.get_by_role("navigation", name="Site").get_by_role("link", name="Checklist").click()
    await page.wait_for_url("**/admin/checklist")
    await expect(page.locator("#integrations")).not_to_have_attribute("aria-busy", "true")


def state(page: Page, title: str) -> Locator:
    return page.locator(f'tr[data-integration="{TESTS[title]}"]').get_by_role("status")


async def test_the_checklist_goes_from_unset_to_working(
    browsing: Browsing,
    users: UserFactory,
    fake_anthropic: FakeAnthropic,
    fake_openai: FakeOpenAI,
    fake_crm: FakeCrm,
    fake_mcp: FakeMcp,
    screenshot_dir: Path,
) -> None:
    admin = await users.create("super_admin")
    await users.create()  # a broker with no CRM location yet
    page = await browsing.page(admin)
    await open_checklist(page)
    await expect(state(page, "Anthropic")).to_have_text("Not set: providerAApiKey")
    await expect(state(page, "CRM")).to_have_text("Not set: crmPrivateToken, crmOwnerLocationId")
    unlinked = page.get_by_role("link", name="1 user without a CRM location")
    await expect(unlinked).to_have_attribute("href", "/admin/users")
    await expect(page.locator("#onboarding-tags")).to_contain_text(
        "tagOnboardingComplete, tagHighGCI"
    )
    await expect(state(page, "MCP")).to_have_text("Not configured (optional)")
    # A test of what is not set says so, not "Failing".
    for title, said in (
        ("Anthropic", "Not set: providerAApiKey"),
        ("CRM", "Not set: crmPrivateToken, crmOwnerLocationId"),
        ("MCP", "Not configured (optional)"),
    ):
        await page.get_by_role("button", name=f"Test {title}").click()
        await expect(state(page, title)).not_to_have_text("Testing…")
        await expect(state(page, title)).to_have_text(said)

    location = str(fake_crm.add_location(name="Operator HQ")["id"])
    await set_settings(
        browsing.server,
        {
            "providerAApiKey": "sk-ant-wrong-key-000000000000",
            "providerBApiKey": fake_openai.api_key,
            "crmPrivateToken": fake_crm.private_token(location),
            "crmOwnerLocationId": location,
            "mcpServerUrl": fake_mcp.url,
            "tagOnboardingComplete": "onboarding-complete",
            "tagHighGCI": "high-gci",
        },
        admin,
    )
    await page.reload()
    await expect(state(page, "Anthropic")).to_have_text("Set, not tested yet")
    await page.get_by_role("button", name="Test Anthropic").click()
    await expect(state(page, "Anthropic")).to_have_text("Failing: Refused: 401 invalid x-api-key")
    await set_settings(browsing.server, {"providerAApiKey": fake_anthropic.api_key}, admin)
    for title in TESTS:
        await page.get_by_role("button", name=f"Test {title}").click()
        await expect(state(page, title)).to_contain_text("Working: ")
    await expect(page.locator("#onboarding-tags")).to_have_text("Onboarding tags set.")
    for size, viewport in {"desktop": DESKTOP, "phone": PHONE}.items():
        await page.set_viewport_size(viewport)
        await photograph(page, screenshot_dir, f"admin-checklist-{size}")


async def test_the_checklist_is_for_super_administrators(
    browsing: Browsing, users: UserFactory
) -> None:
    page = await browsing.page(await users.create("admin"))
    await page.goto("/chat")
    await expect(page.get_by_role("link", name="Checklist")).to_have_count(0)
    response = await page.goto("/admin/checklist")
    assert response is not None and response.status == 403
