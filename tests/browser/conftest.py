"""Browser tests: the pages in Debian's Chromium, driven by Playwright, against the real
service and its loopback fakes.

One browser for the whole session, a fresh context (cookies, storage) per test. Chromium is
launched by its path (`make test` installs Debian's package when missing; no browser download).
Screenshots go to `UI_SCREENSHOT_DIR` when it is set (`make ui-screenshots` points it at
docs/ui/), else to the run's temporary directory.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from playwright.async_api import (
    Browser,
    BrowserContext,
    Page,
    ViewportSize,
    async_playwright,
    expect,
)

from controlcenter.auth.models import UserRecord
from tests.chat.helpers import set_settings
from tests.conftest import AppUser, RunningServer, UserFactory
from tests.dbtools import writing
from tests.fakes.crm import FakeCrm
from tests.fakes.llm import FakeAnthropic

CHROMIUM = os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium")
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
DESKTOP = ViewportSize(width=1280, height=800)
PHONE = ViewportSize(width=375, height=740)
PHONE_390 = ViewportSize(width=390, height=844)  # a current phone's screen
VIEWPORTS = {"desktop": DESKTOP, "phone": PHONE_390}  # the sizes each chat control is tried at
# How long an action or an `expect` waits for the page before it fails. The browser tests run
# beside the two database suites (`make test`), so a page answers later than on an idle machine;
# a wait ends as soon as its condition holds, so a longer one costs nothing when all is well.
WAIT_MS = 15_000
expect.set_options(timeout=WAIT_MS)
COMPANY_ID = "companyBrowser000001"
AGENCY_KEY = "agency-oauth-token-browser-0001"


@pytest.fixture(scope="session")
def chromium() -> str:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"Chromium not found at {CHROMIUM}: run scripts/ensure-chromium.sh")
    return CHROMIUM


@pytest.fixture(scope="session")
async def browser(chromium: str) -> AsyncIterator[Browser]:
    async with async_playwright() as playwright:
        launched = await playwright.chromium.launch(
            executable_path=chromium, headless=True, args=CHROMIUM_FLAGS
        )
        yield launched
        await launched.close()


@dataclass
class Browsing:
    """Opens pages of the running service, signed in as a given user or not."""

    browser: Browser
    server: RunningServer
    contexts: list[BrowserContext]
    errors: list[str]  # uncaught page errors and console errors, of every page opened

    async def page(self, user: AppUser | None = None, viewport: ViewportSize = DESKTOP) -> Page:
        context = await self.browser.new_context(viewport=viewport, base_url=self.server.url)
        context.set_default_timeout(WAIT_MS)
        self.contexts.append(context)
        if user is not None:
            await context.add_cookies(
                [{"name": "session", "value": user.token, "url": self.server.url}]
            )
        page = await context.new_page()
        page.on("pageerror", lambda exc: self.errors.append(str(exc)))
        page.on("console", lambda msg: self._console(msg.type, msg.text))
        return page

    def _console(self, kind: str, text: str) -> None:
        # A refused request (the 4xx a test provokes) is logged by Chromium as an error too.
        if kind == "error" and "Failed to load resource" not in text:
            self.errors.append(text)


async def sign_in(page: Page, email: str, password: str) -> None:
    """Fills the sign-in form of the page that shows it and sends it."""
    await page.get_by_label("Email").fill(email)
    await page.get_by_label("Password").fill(password)
    await page.get_by_role("button", name="Sign in").click()


@pytest.fixture
async def browsing(browser: Browser, server: RunningServer) -> AsyncIterator[Browsing]:
    state = Browsing(browser, server, [], [])
    yield state
    assert state.errors == [], state.errors
    for context in state.contexts:
        await context.close()


@pytest.fixture(scope="session")
def screenshot_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    chosen = os.environ.get("UI_SCREENSHOT_DIR")
    path = Path(chosen) if chosen else tmp_path_factory.mktemp("ui")
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture
async def broker(
    server: RunningServer, users: UserFactory, fake_crm: FakeCrm, fake_anthropic: FakeAnthropic
) -> AppUser:
    """A broker linked to a location of the fake CRM (one contact, one calendar), with the
    agency's CRM credentials and the Anthropic key saved by a super administrator."""
    fake_crm.add_agency(COMPANY_ID, AGENCY_KEY)
    location = str(fake_crm.add_location(company_id=COMPANY_ID, name="Harbor Realty")["id"])
    fake_crm.add_contact(
        location, firstName="Dana", lastName="Whitfield", email="dana@northpier.example"
    )
    fake_crm.add_calendar(location, "Property tours")
    admin = await users.create("super_admin")
    await set_settings(
        server,
        {
            "crmAgencyApiKey": AGENCY_KEY,
            "crmAgencyId": COMPANY_ID,
            "providerAApiKey": fake_anthropic.api_key,
        },
        admin,
    )
    user = await users.create()
    async with writing(server.db) as db:
        row = await db.get(UserRecord, user.id)
        assert row is not None
        row.crm_location_id = location
    return user
