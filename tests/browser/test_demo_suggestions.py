"""The demo model answers each prompt the empty chat suggests with a fitting tool call and
answer; between them a list, a table and a code block (with its `Copy code` button)."""

from __future__ import annotations

from playwright.async_api import expect

from tests.browser.conftest import Browsing
from tests.browser.test_layout import demo_broker
from tests.conftest import RunningServer, UserFactory
from tests.fakes.crm import FakeCrm
from tests.fakes.llm import FakeAnthropic

# Each suggestion: the tools its answer calls, and a text its answer shows.
EXPECTED = {
    "Who are my newest contacts?": (["contacts_get-contacts"], "Your contacts"),
    "What is on my calendar this week?": (
        ["calendars_get-calendars", "calendars_get-calendar-events"],
        "Coming up in the next two weeks",
    ),
    "Which deals are open in my pipeline?": (
        ["opportunities_search-opportunity"],
        "Open deals are worth",
    ),
    "Which conversations are waiting for my reply?": (
        ["conversations_search-conversation"],
        "Recent conversations",
    ),
    "Which tasks are due for my contacts?": (
        ["contacts_get-contacts", "contacts_get-all-tasks"],
        "Send warehouse shortlist",
    ),
}


async def test_every_suggestion_gets_a_fitting_call_and_answer(
    browsing: Browsing,
    server: RunningServer,
    users: UserFactory,
    fake_crm: FakeCrm,
    fake_anthropic: FakeAnthropic,
) -> None:
    broker, _ = await demo_broker(server, users, fake_crm, fake_anthropic)
    page = await browsing.page(broker)
    await page.goto("/chat")
    suggestions = page.get_by_role("list", name="Suggestions").get_by_role("button")
    await expect(suggestions).not_to_have_count(0)
    offered = await suggestions.all_inner_texts()
    assert set(offered) <= set(EXPECTED), offered
    seen = {"list": False, "table": False, "code": False}
    for prompt in EXPECTED:
        await page.goto("/chat")
        await page.get_by_role("textbox", name="Message").fill(prompt)
        await page.get_by_role("button", name="Send").click()
        answer = page.locator(".msg.assistant")
        await expect(answer.locator(".msg-meta button", has_text="Copy")).to_have_count(1)
        tools, said = EXPECTED[prompt]
        cards = answer.locator(".tool-card")
        called = {await card.get_attribute("data-tool") for card in await cards.all()}
        assert called == set(tools), (prompt, called)
        await expect(answer.locator(".tool-status.failed")).to_have_count(0)
        await expect(answer.locator(".markdown").last).to_contain_text(said)
        seen["list"] |= await answer.locator(".markdown ul li").count() > 0
        seen["table"] |= await answer.locator(".markdown table").count() > 0
        if await answer.locator(".markdown .code-block").count():
            seen["code"] = True
            await expect(answer.get_by_role("button", name="Copy code")).to_be_visible()
    assert seen == {"list": True, "table": True, "code": True}
