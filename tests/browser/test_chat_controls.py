"""The chat page's controls: Stop, resuming after a reload, approving or denying
a write, and each answer's token usage (for administrators)."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from playwright.async_api import Route, expect

from tests.browser.conftest import Browsing
from tests.browser.test_chat_page import answer_done, ask
from tests.conftest import AppUser, UserFactory
from tests.fakes.llm import FakeAnthropic, Reply, ToolUse

POLICY = "/api/v1/admin/chat-policy"
TAGS = {"contactId": "missingContact01", "tags": ["vip"]}  # a write, on a contact not there


@pytest.fixture
async def writes_need_approval(users: UserFactory, client: httpx.AsyncClient) -> None:
    """The chat policy, set by a super admin: each write waits for the user's approval."""
    boss = await users.create("super_admin")
    answer = await client.put(POLICY, json={"toolApproval": "writes"}, headers=boss.headers)
    assert answer.status_code == 200


async def test_stop_ends_the_answer_and_the_usage_is_for_administrators(
    browsing: Browsing, broker: AppUser, users: UserFactory, fake_anthropic: FakeAnthropic
) -> None:
    fake_anthropic.script(Reply(text="Done quickly.", usage=(120, 8)))
    admin_page = await ask(browsing, await users.create("admin"), "Tokens?")
    await answer_done(admin_page)
    usage = admin_page.locator(".msg.assistant .usage")
    await expect(usage).to_have_text("120 tokens in · 8 out")

    fake_anthropic.script(Reply(text="Done quickly.", usage=(120, 8)))
    page = await ask(browsing, broker, "First")
    await answer_done(page)
    first = page.locator(".msg.assistant").first
    await expect(first.locator(".markdown")).to_have_text("Done quickly.")
    await expect(first.locator(".usage")).to_have_count(0)  # a broker has no use for it
    stop = page.get_by_role("button", name="Stop")
    await expect(stop).to_be_hidden()

    fake_anthropic.script(Reply(text="never shown", delay_s=30))  # the provider holds
    await page.get_by_role("textbox", name="Message").fill("Second")
    await page.get_by_role("button", name="Send").click()
    await expect(stop).to_be_visible()
    await stop.click()
    await answer_done(page)
    second = page.locator(".msg.assistant").nth(1)
    await expect(second.locator(".stopped")).to_have_text("Stopped")
    await expect(second.get_by_role("alert")).to_be_hidden()
    await expect(stop).to_be_hidden()
    await expect(page.get_by_role("button", name="Send")).to_be_enabled()


async def test_a_reload_during_an_answer_follows_it_to_the_end(
    browsing: Browsing, broker: AppUser, fake_anthropic: FakeAnthropic
) -> None:
    fake_anthropic.script(Reply(text="The answer after the reload.", delay_s=2.0))
    page = await ask(browsing, broker, "Slow one")
    await expect(page.get_by_role("button", name="Stop")).to_be_visible()
    await page.wait_for_url("**/chat/*")
    await page.reload()
    answer = page.locator(".msg.assistant")
    await expect(answer).to_have_count(1)
    await expect(answer.locator(".markdown")).to_have_text("The answer after the reload.")
    await answer_done(page)
    await expect(answer.get_by_role("alert")).to_be_hidden()
    await page.reload()  # finished: the stored answer, shown once, nothing to resume
    await expect(page.locator(".msg.assistant .markdown")).to_have_text(
        ["The answer after the reload."]
    )


@pytest.mark.usefixtures("writes_need_approval")
async def test_a_write_waits_for_approve_or_deny_on_its_card(
    browsing: Browsing, broker: AppUser, fake_anthropic: FakeAnthropic
) -> None:
    fake_anthropic.script(
        Reply(tool_uses=[ToolUse("contacts_add-tags", TAGS, id="toolu_a")]),
        Reply(tool_uses=[ToolUse("contacts_add-tags", TAGS, id="toolu_b")]),
        Reply(text="Done."),
    )
    page = await ask(browsing, broker, "Tag Dana")
    cards = page.locator(".tool-card")
    await expect(cards.nth(0).locator(".tool-status")).to_have_text("Needs approval")
    await cards.nth(0).get_by_role("button", name="Approve").click()
    await expect(cards.nth(0).locator(".tool-approval")).to_have_count(0)
    # The approved call then runs (the CRM's token exchange and request): on CI the pages'
    # tests share the two cores with the SQLite suite, and 5 s was once not enough.
    await expect(cards.nth(0).locator(".tool-status")).to_have_text(
        ["Failed"], timeout=20_000
    )  # ran: no contact
    await expect(cards.nth(1).locator(".tool-status")).to_have_text("Needs approval")
    await cards.nth(1).get_by_role("button", name="Deny").click()
    await expect(cards.nth(1).locator(".tool-error")).to_have_text("Denied by the user")
    await answer_done(page)
    await expect(page.locator(".msg.assistant .markdown")).to_have_text("Done.")


@pytest.mark.usefixtures("writes_need_approval")
async def test_an_approved_calls_result_stays_when_it_comes_before_the_approvals_answer(
    browsing: Browsing, broker: AppUser, fake_anthropic: FakeAnthropic
) -> None:
    fake_anthropic.script(
        Reply(tool_uses=[ToolUse("contacts_add-tags", TAGS, id="toolu_a")]),
        Reply(text="Done."),
    )
    page = await ask(browsing, broker, "Tag Dana")
    card = page.locator(".tool-card").first
    await expect(card.locator(".tool-status")).to_have_text("Needs approval")

    # The approval reaches the service at once; its answer reaches the page only after the
    # stream has shown the call's result (as a loaded machine may order them).
    approvals = asyncio.Queue[Route]()

    async def hold(route: Route) -> None:
        await approvals.put(route)

    await page.route("**/tool-calls/*/approve", hold)
    await card.get_by_role("button", name="Approve").click()
    route = await approvals.get()
    response = await route.fetch()
    await expect(card.locator(".tool-status")).to_have_text("Failed")  # ran: no contact
    await route.fulfill(response=response)
    await answer_done(page)
    await expect(page.locator(".msg.assistant .markdown")).to_have_text("Done.")
    await expect(card.locator(".tool-approval")).to_have_count(0)  # the answer was read
    await expect(card.locator(".tool-status")).to_have_text("Failed")
