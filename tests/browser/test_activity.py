"""The ledger's pages in Chromium: the broker's /activity with `Undo`, the chat's tool card
with `Undo`, and /admin/activity for administrators (no undo there)."""

from __future__ import annotations

from pathlib import Path

from playwright.async_api import Page, expect

from tests.browser.conftest import DESKTOP, PHONE, Browsing
from tests.browser.test_chat_page import answer_done, send
from tests.browser.test_layout import photograph
from tests.conftest import AppUser, UserFactory
from tests.fakes.crm import FakeCrm
from tests.fakes.llm import FakeAnthropic, Reply, ToolUse


def dana(fake_crm: FakeCrm) -> dict[str, object]:
    [found] = [c for c in fake_crm.state.contacts.values() if c.get("firstName") == "Dana"]
    return found


async def chat_write(page: Page, fake: FakeAnthropic, text: str, *uses: ToolUse) -> None:
    fake.script(Reply(tool_uses=list(uses)), Reply(text="Done."))
    await page.goto("/chat")
    await send(page, text)
    await answer_done(page)


async def test_a_broker_undoes_a_change_on_the_activity_page(
    browsing: Browsing,
    broker: AppUser,
    fake_crm: FakeCrm,
    fake_anthropic: FakeAnthropic,
    screenshot_dir: Path,
) -> None:
    contact = dana(fake_crm)
    page = await browsing.page(broker)
    await chat_write(
        page,
        fake_anthropic,
        "Tag Dana as a hot lead and note the docks",
        ToolUse("contacts_add-tags", {"contactId": contact["id"], "tags": ["hot-lead"]}),
        ToolUse("contacts_create-note", {"contactId": contact["id"], "body": "Needs 6 docks"}),
    )
    await chat_write(
        page,
        fake_anthropic,
        "Her phone is 555-0199",
        ToolUse("contacts_update-contact", {"contactId": contact["id"], "phone": "555-0199"}),
    )
    await page.get_by_role("navigation", name="Site").get_by_role("link", name="Activity").click()
    await expect(page.get_by_role("heading", name="Activity")).to_be_visible()
    entries = page.get_by_role("list", name="Entries").get_by_role("listitem")
    await expect(entries).to_have_count(3)
    await expect(entries.first).to_contain_text("Phone of Dana Whitfield: (empty) → 555-0199")
    await expect(entries.first.get_by_role("link", name="Open conversation")).to_be_visible()
    for size, viewport in (("phone", PHONE), ("desktop", DESKTOP)):
        await page.set_viewport_size(viewport)
        await photograph(page, screenshot_dir, f"activity-{size}")

    await entries.first.get_by_role("button", name="Undo").click()
    await expect(page.get_by_role("status")).to_have_text(
        "Undone: Phone of Dana Whitfield: 555-0199 → (empty)"
    )
    await expect(entries).to_have_count(4)
    await expect(entries.first).to_contain_text("Undo: Update a contact")
    await expect(entries.nth(1)).to_contain_text("Undone")
    await expect(entries.nth(1).get_by_role("button", name="Undo")).to_have_count(0)
    assert not dana(fake_crm).get("phone")

    # A search narrows the list; the note's entry still has its Undo.
    await page.get_by_role("searchbox", name="Search activity").fill("docks")
    await expect(entries).to_have_count(1)
    await expect(entries.first).to_contain_text("Needs 6 docks")
    await expect(entries.first.get_by_role("button", name="Undo")).to_be_visible()

    # Changed in the CRM since: the undo is refused in words, and nothing is written.
    fake_crm.state.contacts[str(contact["id"])]["tags"].remove("hot-lead")
    await page.get_by_role("searchbox", name="Search activity").fill("hot-lead")
    await expect(entries).to_have_count(1)
    await expect(entries.first).to_contain_text("added hot-lead")
    await entries.first.get_by_role("button", name="Undo").click()
    await expect(page.get_by_role("alert")).to_have_text(
        "Not undone: The record changed since the assistant's change, so it was left as it is."
    )


async def test_the_tool_card_of_a_write_has_undo(
    browsing: Browsing, broker: AppUser, fake_crm: FakeCrm, fake_anthropic: FakeAnthropic
) -> None:
    contact = dana(fake_crm)
    page = await browsing.page(broker)
    await chat_write(
        page,
        fake_anthropic,
        "Look her up and add a note",
        ToolUse("contacts_get-contact", {"contactId": contact["id"]}),
        ToolUse("contacts_create-note", {"contactId": contact["id"], "body": "Wants Pier 9"}),
    )
    cards = page.locator(".tool-card")
    await expect(cards).to_have_count(2)
    await expect(cards.nth(1).get_by_role("button", name="Undo")).to_be_visible()
    await expect(cards.nth(0).get_by_role("button", name="Undo")).to_have_count(0)  # a read
    await cards.nth(1).get_by_role("button", name="Undo").click()
    await expect(cards.nth(1).get_by_role("status")).to_have_text(
        "Undone: Note deleted: Wants Pier 9"
    )
    await expect(cards.nth(1).get_by_role("button", name="Undo")).to_have_count(0)
    assert fake_crm.state.notes == {}
    # Reopened, the conversation offers no Undo for what was undone.
    await page.reload()
    await expect(page.locator(".tool-card")).to_have_count(2)
    await expect(page.get_by_role("button", name="Undo")).to_have_count(0)


async def test_administrators_see_every_brokers_activity_without_undo(
    browsing: Browsing,
    broker: AppUser,
    users: UserFactory,
    fake_crm: FakeCrm,
    fake_anthropic: FakeAnthropic,
) -> None:
    contact = dana(fake_crm)
    page = await browsing.page(broker)
    await chat_write(
        page,
        fake_anthropic,
        "Note it",
        ToolUse("contacts_create-note", {"contactId": contact["id"], "body": "Call Friday"}),
    )
    response = await page.goto("/admin/activity")
    assert response is not None and response.status == 403
    admin = await users.create("admin")
    seen = await browsing.page(admin)
    await seen.goto("/chat")
    await (
        seen.get_by_role("navigation", name="Site").get_by_role("link", name="All activity").click()
    )
    entries = seen.get_by_role("list", name="Entries").get_by_role("listitem")
    await expect(entries).to_have_count(1)
    await expect(entries.first).to_contain_text("Note created for Dana Whitfield: Call Friday")
    await expect(entries.first).to_contain_text(f"User {broker.id}")
    await expect(seen.get_by_role("button", name="Undo")).to_have_count(0)
