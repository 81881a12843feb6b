"""Light and dark themes on every page: the system's choice, or the reader's `Theme`,
remembered; axe-core (vendored, tests/browser/vendor/) finds no contrast or naming problem
on any page in either theme, at a desktop's and a phone's size."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import Page, expect

from tests.browser.conftest import VIEWPORTS, Browsing
from tests.browser.test_chat_page import answer_done, send
from tests.browser.test_layout import demo_broker, photograph
from tests.conftest import RunningServer, UserFactory
from tests.fakes.crm import FakeCrm
from tests.fakes.llm import FakeAnthropic

AXE = Path(__file__).parent / "vendor" / "axe-core-4.14.1.min.js"
# What the check is about: contrast, and every control, image, frame and page named.
RULES = [
    "color-contrast",
    "button-name",
    "link-name",
    "label",
    "select-name",
    "input-button-name",
    "aria-input-field-name",
    "aria-command-name",
    "aria-toggle-field-name",
    "document-title",
    "image-alt",
    "frame-title",
    "list",
    "listitem",
    "heading-order",
    "landmark-unique",
    "region",
    "scrollable-region-focusable",
    "nested-interactive",
    "duplicate-id-aria",
]


async def violations(page: Page) -> list[dict[str, Any]]:
    """axe-core's violations of `RULES` on the page as it is."""
    if not await page.evaluate("typeof axe !== 'undefined'"):
        await page.evaluate(AXE.read_text())  # by the DevTools protocol: the page's CSP holds
    result: dict[str, Any] = await page.evaluate(
        """async (rules) => {
            const result = await axe.run(document, { runOnly: { type: "rule", values: rules } });
            return {
                passed: result.passes.map((rule) => rule.id),
                violations: result.violations.map((v) => ({
                    id: v.id,
                    nodes: v.nodes.map((n) => n.target.join(" ") + ": " + n.failureSummary),
                })),
            };
        }""",
        RULES,
    )
    # The check ran: contrast and control names were tested on this page, not skipped.
    tested = {*result["passed"], *(v["id"] for v in result["violations"])}
    assert {"color-contrast", "document-title"} <= tested, tested
    found: list[dict[str, Any]] = result["violations"]
    return found


async def has_theme(page: Page, theme: str) -> None:
    await expect(page.locator("html")).to_have_attribute("data-theme", theme)


async def test_the_system_theme_is_followed_until_the_reader_picks_one(
    browsing: Browsing, server: RunningServer, users: UserFactory
) -> None:
    user = await users.create()
    page = await browsing.page(user)
    await page.emulate_media(color_scheme="dark")
    await page.goto("/account")
    await has_theme(page, "dark")
    await page.emulate_media(color_scheme="light")
    await has_theme(page, "light")  # followed as it changes

    theme = page.get_by_role("button", name="Theme")
    await expect(theme).to_have_attribute("aria-pressed", "false")
    await theme.click()
    await has_theme(page, "dark")
    await expect(theme).to_have_attribute("aria-pressed", "true")
    background = await page.evaluate("getComputedStyle(document.body).backgroundColor")
    assert background == "rgb(15, 20, 27)"
    # Remembered, on every page, signed out too, whatever the system says.
    for path in ("/chat", "/setup", "/login"):
        await page.goto(path)
        await has_theme(page, "dark")
    signed_out = await browsing.page()
    await signed_out.goto("/login")
    await expect(signed_out.get_by_role("button", name="Theme")).to_be_visible()


@pytest.mark.parametrize("size", ["desktop", "phone"])
async def test_no_contrast_or_naming_violation_on_any_page_in_either_theme(
    browsing: Browsing,
    server: RunningServer,
    users: UserFactory,
    fake_crm: FakeCrm,
    fake_anthropic: FakeAnthropic,
    screenshot_dir: Path,
    size: str,
) -> None:
    broker, admin = await demo_broker(server, users, fake_crm, fake_anthropic)
    viewport = VIEWPORTS[size]
    problems: dict[str, list[dict[str, Any]]] = {}

    async def check(page: Page, name: str) -> None:
        for theme in ("light", "dark"):
            await page.evaluate("(theme) => localStorage.setItem('cc.theme', theme)", theme)
            await page.reload()
            await page.wait_for_load_state("networkidle")
            found = await violations(page)
            if found:
                problems[f"{name} {theme}"] = found
            if name in ("chat-new", "chat-answer"):  # the screens of docs/ui.md
                await photograph(page, screenshot_dir, f"{name}-{theme}-{size}")

    page = await browsing.page(viewport=viewport)
    await page.goto("/login")
    await check(page, "login")

    page = await browsing.page(broker, viewport)
    await page.goto("/chat")
    await check(page, "chat-new")
    await send(page, "Show me my contacts and my calendar")
    await answer_done(page)
    await page.wait_for_url("**/chat/*")
    await check(page, "chat-answer")
    for path in ("/setup", "/account"):
        await page.goto(path)
        await check(page, path.strip("/"))

    page = await browsing.page(admin, viewport)
    for path in ("/admin/settings", "/admin/users", "/admin/checklist", "/admin/mcp", "/chat"):
        await page.goto(path)
        await check(page, path.strip("/").replace("/", "-"))
    assert problems == {}
