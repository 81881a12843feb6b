"""Every page at 375 px (no horizontal scroll) and on a desktop, photographed for docs/ui.md."""

from __future__ import annotations

from pathlib import Path

from playwright.async_api import Page, expect

from controlcenter.auth.models import UserRecord
from tests.browser.conftest import DESKTOP, PHONE, Browsing, sign_in
from tests.chat.helpers import set_settings
from tests.conftest import AppUser, RunningServer, UserFactory
from tests.dbtools import writing
from tests.fakes.crm import DEMO_AGENCY_TOKEN, DEMO_COMPANY_ID, DEMO_LOCATION_ID, FakeCrm, seed_demo
from tests.fakes.demo_provider import demo_responder
from tests.fakes.llm import FakeAnthropic

SIZES = {"phone": PHONE, "desktop": DESKTOP}


async def no_horizontal_scroll(page: Page) -> None:
    overflow = await page.evaluate(
        "() => [document.documentElement.scrollWidth, window.innerWidth]"
    )
    assert overflow[0] <= overflow[1], f"{page.url}: {overflow[0]} px wide in {overflow[1]} px"


async def photograph(page: Page, folder: Path, name: str) -> None:
    await no_horizontal_scroll(page)
    path = folder / f"{name}.png"
    await page.screenshot(path=str(path), full_page=True, animations="disabled")
    assert path.stat().st_size > 5_000


async def demo_broker(
    server: RunningServer, users: UserFactory, fake_crm: FakeCrm, fake_anthropic: FakeAnthropic
) -> tuple[AppUser, AppUser]:
    """The `make demo` world: its CRM data and its model, a broker and a super administrator."""
    seed_demo(fake_crm)
    fake_anthropic.responder = demo_responder
    admin = await users.create("super_admin", email="admin@example.com")
    await set_settings(
        server,
        {
            "crmAgencyApiKey": DEMO_AGENCY_TOKEN,
            "crmAgencyId": DEMO_COMPANY_ID,
            "providerAApiKey": fake_anthropic.api_key,
            "tagHighGCI": "high-gci",
            "notificationEmail": "ops@example.com",
        },
        admin,
    )
    broker = await users.create(email="riley@example.com")
    async with writing(server.db) as db:
        row = await db.get(UserRecord, broker.id)
        assert row is not None
        row.crm_location_id = DEMO_LOCATION_ID
        row.name = "Riley Broker"
    return broker, admin


async def test_every_page_fits_a_phone_and_a_desktop(
    browsing: Browsing,
    server: RunningServer,
    users: UserFactory,
    fake_crm: FakeCrm,
    fake_anthropic: FakeAnthropic,
    screenshot_dir: Path,
) -> None:
    broker, admin = await demo_broker(server, users, fake_crm, fake_anthropic)
    for size, viewport in SIZES.items():
        page = await browsing.page(viewport=viewport)
        await page.goto("/login")
        await sign_in(page, broker.email, "wrong password")
        await expect(page.get_by_role("alert")).to_be_visible()
        await photograph(page, screenshot_dir, f"login-{size}")

        page = await browsing.page(broker, viewport)
        await page.goto("/chat")
        await page.get_by_role("textbox", name="Message").fill(
            "Show me my contacts and my calendar"
        )
        await page.get_by_role("button", name="Send").click()
        await expect(page.locator(".msg.assistant[aria-busy]")).to_have_count(0, timeout=20_000)
        await expect(page.locator(".tool-card")).to_have_count(3)
        await expect(page.locator(".tool-status.ok")).to_have_count(3)
        await photograph(page, screenshot_dir, f"chat-{size}")

        await page.goto("/setup")
        await expect(page.locator("#setup-form")).not_to_have_attribute("aria-busy", "true")
        await page.get_by_label("Brokerage name").fill("Harbor Commercial Realty")
        await page.get_by_label("Pain point 1", exact=True).fill("Too many clicks")
        await page.get_by_role("button", name="Save").click()
        await expect(page.get_by_role("status")).to_have_text("Saved")
        await photograph(page, screenshot_dir, f"setup-{size}")

        await page.goto("/account")
        await expect(page.get_by_role("heading", name="Your account")).to_be_visible()
        await photograph(page, screenshot_dir, f"account-{size}")

        page = await browsing.page(admin, viewport)
        await page.goto("/admin/settings")
        await expect(page.locator("#settings-form")).not_to_have_attribute("aria-busy", "true")
        await photograph(page, screenshot_dir, f"admin-settings-{size}")

        await page.goto("/admin/users")
        await expect(page.locator("#users-body tr")).to_have_count(2)
        await photograph(page, screenshot_dir, f"admin-users-{size}")
