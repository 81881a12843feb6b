"""The layout on a 390 x 844 phone and on a desktop, measured: at most 120 px of bars above the
messages in every state of the chat, the site menu on one row that scrolls sideways, a wide
table that says it scrolls, whole conversation titles, buttons of a row alike in height, no
cell cut off, notices coloured by their meaning; photographed in both themes for docs/ui.md
and checked by axe-core in each state."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from playwright.async_api import Page, expect

from tests.browser.conftest import DESKTOP, PHONE_390, Browsing
from tests.browser.test_chat_page import answer_done, send
from tests.browser.test_layout import demo_broker, photograph
from tests.browser.test_themes import violations
from tests.conftest import RunningServer, UserFactory
from tests.fakes.crm import FakeCrm
from tests.fakes.llm import FakeAnthropic

MAX_BARS_PX = 120


async def bars_above_messages(page: Page) -> float:
    top: float = await page.evaluate(
        "() => document.getElementById('messages').getBoundingClientRect().top"
    )
    return top


async def heights(page: Page, selector: str) -> list[float]:
    found: list[float] = await page.locator(selector).evaluate_all(
        "(nodes) => nodes.map((n) => Math.round(n.getBoundingClientRect().height))"
    )
    return found


async def in_both_themes(
    page: Page, folder: Path, name: str, problems: dict[str, Any], reload: bool = True
) -> None:
    """A photograph in each theme, and axe-core's findings on the state as it is."""
    for theme in ("light", "dark"):
        await page.evaluate(
            "(theme) => document.documentElement.setAttribute('data-theme', theme)", theme
        )
        found = await violations(page)
        if found:
            problems[f"{name} {theme}"] = found
        await photograph(page, folder, f"{name}-{theme}")


async def test_the_chat_on_a_phone_keeps_its_bars_short_in_every_state(
    browsing: Browsing,
    server: RunningServer,
    users: UserFactory,
    fake_crm: FakeCrm,
    fake_anthropic: FakeAnthropic,
    screenshot_dir: Path,
) -> None:
    broker, _ = await demo_broker(server, users, fake_crm, fake_anthropic)
    page = await browsing.page(broker, PHONE_390)
    problems: dict[str, Any] = {}
    await page.goto("/chat")
    await expect(page.get_by_role("list", name="Suggestions")).to_be_visible()
    assert await bars_above_messages(page) <= MAX_BARS_PX

    # Three conversations that start alike, told apart by their whole titles.
    for question in (
        "Show me my contacts, the ones from the harbor project",
        "Show me my contacts, the ones who invest in retail",
        "Which deals are open in my pipeline?",
    ):
        await page.goto("/chat")
        await send(page, question)
        await answer_done(page)
        await page.wait_for_url("**/chat/*")
    assert await bars_above_messages(page) <= MAX_BARS_PX

    # The pipeline's table scrolls in its box, and says so.
    box = page.locator(".msg.assistant .table-scroll")
    assert await box.evaluate("(b) => b.scrollWidth > b.clientWidth")
    await expect(page.locator(".msg.assistant .scroll-hint")).to_have_text(
        "Scroll sideways for more columns →"
    )
    await in_both_themes(page, screenshot_dir, "chat-table-phone", problems)

    # History: a panel over the messages, the bars as they were; whole titles, wrapped.
    await page.get_by_role("button", name="History").click()
    nav = page.get_by_role("navigation", name="Conversations")
    for title in (
        "Show me my contacts, the ones from the harbor project",
        "Show me my contacts, the ones who invest in retail",
    ):
        link = nav.get_by_role("link", name=title)
        await expect(link).to_be_visible()
        assert await link.evaluate(
            "(a) => a.scrollWidth <= a.clientWidth && a.scrollHeight <= a.clientHeight + 1"
        )
    assert await bars_above_messages(page) <= MAX_BARS_PX
    await in_both_themes(page, screenshot_dir, "chat-history-phone", problems)
    await page.get_by_role("button", name="History").click()

    # Renaming: the form in the bar, its buttons one height.
    await page.get_by_role("button", name="Rename").click()
    assert await bars_above_messages(page) <= MAX_BARS_PX
    assert len(set(await heights(page, "#rename-form button"))) == 1
    await page.get_by_role("button", name="Cancel").click()

    # Editing the last message: Resend and Cancel one height.
    await page.locator("article.msg.user").get_by_role("button", name="Edit").click()
    assert len(set(await heights(page, ".edit-actions button"))) == 1
    assert await bars_above_messages(page) <= MAX_BARS_PX
    assert problems == {}


async def test_admin_pages_menu_tables_forms_and_notices(
    browsing: Browsing,
    server: RunningServer,
    users: UserFactory,
    fake_crm: FakeCrm,
    fake_anthropic: FakeAnthropic,
    screenshot_dir: Path,
) -> None:
    _, admin = await demo_broker(server, users, fake_crm, fake_anthropic)
    problems: dict[str, Any] = {}

    # On a phone the administrator's menu is one row that scrolls sideways.
    page = await browsing.page(admin, PHONE_390)
    await page.goto("/admin/users")
    menu = page.get_by_role("navigation", name="Site")
    tops = await menu.get_by_role("link").evaluate_all(
        "(links) => links.map((a) => Math.round(a.getBoundingClientRect().top))"
    )
    assert len(set(tops)) == 1, tops
    assert await menu.evaluate("(nav) => nav.scrollWidth > nav.clientWidth")
    assert await page.locator(".topbar").evaluate("(bar) => bar.offsetHeight") <= 50
    await menu.get_by_role("link", name="Checklist").scroll_into_view_if_needed()
    await expect(menu.get_by_role("link", name="Checklist")).to_be_in_viewport()

    # On a desktop no cell of the users table is cut off, the CRM location readable whole.
    page = await browsing.page(admin, DESKTOP)
    await page.goto("/admin/users")
    await expect(page.locator("#users-body tr")).to_have_count(2)
    await page.locator("#users-body tr").nth(1).locator("input.crm").fill("demoLocation00000001")
    cut = await page.locator("#users-table td, #users-table input").evaluate_all(
        "(cells) => cells.filter((c) => c.scrollWidth > c.clientWidth + 1).map((c) => c.outerHTML)"
    )
    assert cut == []
    widths = await page.locator("#users-table select.role").evaluate_all(
        """(selects) => selects.map((s) => {
            const probe = document.createElement('span');
            probe.style.font = getComputedStyle(s).font;
            probe.textContent = s.options[s.selectedIndex].text;
            document.body.append(probe);
            const fits = probe.getBoundingClientRect().width + 28 <= s.clientWidth;
            probe.remove();
            return fits;
        })"""
    )
    assert all(widths), widths
    await in_both_themes(page, screenshot_dir, "admin-users-desktop", problems)

    # /admin/mcp: the Enabled box beside its word, Check servers apart from the table.
    await page.goto("/admin/mcp")
    enabled = page.get_by_label("Enabled")
    box = await enabled.bounding_box()
    label = await page.locator("label.check").bounding_box()
    assert box is not None and label is not None
    assert label["height"] <= 32 and box["x"] < label["x"] + 4
    gap = await page.evaluate(
        """() => document.getElementById('check-servers').getBoundingClientRect().top
            - document.querySelector('#servers-table').closest('.table-scroll')
                .getBoundingClientRect().bottom"""
    )
    assert gap >= 8
    await in_both_themes(page, screenshot_dir, "admin-mcp-desktop", problems)

    # A notice that something is left to do is not the green of success.
    colours = await page.evaluate(
        """() => {
            const probe = (cls) => {
                const p = document.createElement('p');
                p.className = cls;
                p.textContent = 'x';
                document.body.append(p);
                const colour = getComputedStyle(p).backgroundColor;
                p.remove();
                return colour;
            };
            return [probe('notice'), probe('notice warning')];
        }"""
    )
    assert colours[0] != colours[1]
    assert problems == {}
