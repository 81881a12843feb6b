"""The chat page's history and turns, at a desktop's and a phone's size: searching, renaming,
date groups and message times; Copy, Regenerate and Edit, with what the API stores after."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from playwright.async_api import Page, expect

from tests.browser.conftest import VIEWPORTS, Browsing
from tests.browser.test_chat_page import answer_done, send
from tests.chat.test_conversation_titles import stored_conversation
from tests.conftest import AppUser
from tests.fakes.llm import FakeAnthropic, Reply

CONVERSATIONS = "/api/v1/control-center/conversations"
DAY_S = 86_400


async def history(page: Page, size: str) -> Any:
    """The Conversations navigation, unfolded on a phone."""
    nav = page.get_by_role("navigation", name="Conversations")
    if size == "phone":
        await nav.get_by_role("button", name="History").click()
    return nav


async def stored_turns(
    browsing: Browsing, user: AppUser, conversation_id: str
) -> list[tuple[str, str]]:
    async with httpx.AsyncClient(base_url=browsing.server.url) as http:
        got = await http.get(f"{CONVERSATIONS}/{conversation_id}", headers=user.headers)
    return [(m["role"], m["content"]) for m in got.json()["conversation"]["messages"]]


async def shown_turns(page: Page) -> list[tuple[str, str]]:
    turns = []
    for article in await page.locator("article.msg").all():
        if "user" in (await article.get_attribute("class") or ""):
            turns.append(("user", await article.locator(".bubble").inner_text()))
        else:
            turns.append(("assistant", await article.locator(".markdown").inner_text()))
    return turns


@pytest.mark.parametrize("size", ["desktop", "phone"])
async def test_search_rename_date_groups_and_times(
    browsing: Browsing, broker: AppUser, size: str
) -> None:
    server = browsing.server
    lease = await stored_conversation(
        server, broker, "Who is Dana?", "Who is Dana?", "Dana leases the Okafor site."
    )
    await stored_conversation(server, broker, "Tours", "Tours this week", age_s=3 * DAY_S)
    await stored_conversation(server, broker, "Pipeline", "My pipeline", age_s=45 * DAY_S)
    page = await browsing.page(broker, VIEWPORTS[size])
    await page.goto(f"/chat/{lease}")
    nav = await history(page, size)
    groups = nav.locator(".list-group")
    await expect(groups).to_have_count(3)
    await expect(groups.nth(0)).to_have_text("Today")
    await expect(groups.nth(1)).to_have_text("Previous 7 days")
    await expect(nav.get_by_role("link")).to_have_count(4)  # New chat and the three

    # Every message shows its time, as a machine-readable <time>.
    times = page.locator("article.msg time")
    await expect(times).to_have_count(2)
    assert (await times.first.get_attribute("datetime") or "").endswith("Z")

    # The search reads message text too, whatever the case.
    await nav.get_by_role("searchbox", name="Search conversations").fill("OKAFOR")
    await expect(nav.locator(".conversation-list a")).to_have_text(["Who is Dana?"])
    await nav.get_by_role("searchbox", name="Search conversations").fill("nothing like it")
    await expect(nav.get_by_text("No conversation matches.")).to_be_visible()
    await nav.get_by_role("searchbox", name="Search conversations").fill("")
    await expect(nav.locator(".conversation-list a")).to_have_count(3)

    # Rename: a textbox Title and Save; the heading and the list follow.
    await page.get_by_role("button", name="Rename").click()
    title = page.get_by_role("textbox", name="Title")
    await expect(title).to_have_value("Who is Dana?")
    await title.fill("   ")
    await page.get_by_role("button", name="Save").click()
    await expect(page.locator("#rename-error")).to_have_text("The title cannot be empty.")
    await title.fill("Dana Whitfield lease")
    await page.get_by_role("button", name="Save").click()
    await expect(page.get_by_role("heading", name="Dana Whitfield lease")).to_be_visible()
    await expect(nav.get_by_role("link", name="Dana Whitfield lease")).to_be_visible()
    await page.reload()
    await expect(page.get_by_role("heading", name="Dana Whitfield lease")).to_be_visible()


@pytest.mark.parametrize("size", ["desktop", "phone"])
async def test_copy_regenerate_and_edit_keep_the_page_and_the_store_alike(
    browsing: Browsing, broker: AppUser, fake_anthropic: FakeAnthropic, size: str
) -> None:
    fake_anthropic.script(Reply(text="Dana is a *tenant rep*."))
    page = await browsing.page(broker, VIEWPORTS[size])
    await page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    await page.goto("/chat")
    await send(page, "Who is Dana?")
    await answer_done(page)
    await page.wait_for_url("**/chat/*")
    conversation_id = page.url.rsplit("/", 1)[1]
    answer = page.locator("article.msg.assistant")

    await answer.get_by_role("button", name="Copy").click()
    assert await page.evaluate("navigator.clipboard.readText()") == "Dana is a *tenant rep*."

    # Regenerate: the answer is replaced, on the page and in the store.
    fake_anthropic.script(Reply(text="Dana Whitfield represents tenants."))
    await answer.get_by_role("button", name="Regenerate").click()
    await answer_done(page)
    expected = [("user", "Who is Dana?"), ("assistant", "Dana Whitfield represents tenants.")]
    assert await shown_turns(page) == expected
    assert await stored_turns(browsing, broker, conversation_id) == expected

    # Edit: the last message becomes a form; Resend replaces it and its answer.
    fake_anthropic.script(Reply(text="Omar is an investor."))
    await page.locator("article.msg.user").get_by_role("button", name="Edit").click()
    box = page.get_by_role("textbox", name="Edit message")
    await expect(box).to_have_value("Who is Dana?")
    await box.fill("Who is Omar?")
    await page.get_by_role("button", name="Resend").click()
    await answer_done(page)
    expected = [("user", "Who is Omar?"), ("assistant", "Omar is an investor.")]
    assert await shown_turns(page) == expected
    assert await stored_turns(browsing, broker, conversation_id) == expected
    # The title was the first message's own: it follows the edit.
    await expect(page.get_by_role("heading", name="Who is Omar?")).to_be_visible()
    await page.reload()
    await expect(page.locator("article.msg")).to_have_count(2)
    assert await shown_turns(page) == expected
    await expect(page.get_by_role("button", name="Regenerate")).to_have_count(1)
    await expect(page.get_by_role("button", name="Edit")).to_have_count(1)


async def test_a_regenerated_answer_can_be_stopped_and_resumed_after_a_reload(
    browsing: Browsing, broker: AppUser, fake_anthropic: FakeAnthropic
) -> None:
    fake_anthropic.script(Reply(text="First answer."))
    page = await browsing.page(broker, VIEWPORTS["phone"])
    await page.goto("/chat")
    await send(page, "Tell me about the Okafor lease")
    await answer_done(page)
    await page.wait_for_url("**/chat/*")
    conversation_id = page.url.rsplit("/", 1)[1]

    fake_anthropic.script(Reply(text="Second answer, after the reload.", delay_s=2.0))
    await page.get_by_role("button", name="Regenerate").click()
    await expect(page.get_by_role("button", name="Stop")).to_be_visible()
    await expect(page.get_by_role("button", name="Regenerate")).to_have_count(0)
    await page.reload()  # the old answer is gone already; the new one is followed
    await expect(page.locator(".msg.assistant .markdown")).to_have_text(
        ["Second answer, after the reload."]
    )
    await answer_done(page)
    expected = [
        ("user", "Tell me about the Okafor lease"),
        ("assistant", "Second answer, after the reload."),
    ]
    assert await stored_turns(browsing, broker, conversation_id) == expected

    fake_anthropic.script(Reply(text="never shown", delay_s=30))
    await page.get_by_role("button", name="Regenerate").click()
    await page.get_by_role("button", name="Stop").click()
    await answer_done(page)
    await expect(page.locator(".msg.assistant .stopped")).to_have_text("Stopped")
    assert await stored_turns(browsing, broker, conversation_id) == [
        ("user", "Tell me about the Okafor lease"),
        ("assistant", ""),
    ]


@pytest.mark.parametrize("size", ["desktop", "phone"])
async def test_an_empty_chat_suggests_prompts_from_the_brokers_tools_and_the_box_grows(
    browsing: Browsing, broker: AppUser, fake_anthropic: FakeAnthropic, size: str
) -> None:
    page = await browsing.page(broker, VIEWPORTS[size])
    await page.goto("/chat")
    suggestions = page.get_by_role("list", name="Suggestions").get_by_role("button")
    await expect(suggestions).to_have_count(4)
    await expect(suggestions.first).to_have_text("Who are my newest contacts?")

    # The message box grows with its text, up to a limit, then scrolls.
    box = page.get_by_role("textbox", name="Message")
    empty = (await box.bounding_box() or {"height": 0})["height"]
    await box.fill("line\n" * 4)
    await box.dispatch_event("input")
    four = (await box.bounding_box() or {"height": 0})["height"]
    await box.fill("line\n" * 40)
    await box.dispatch_event("input")
    forty = (await box.bounding_box() or {"height": 0})["height"]
    assert empty < four < forty <= VIEWPORTS[size]["height"] * 0.4 + 1
    assert await box.evaluate("box => box.scrollHeight > box.clientHeight")

    fake_anthropic.script(Reply(text="Dana Whitfield, added today."))
    await box.fill("")
    await suggestions.first.click()
    await expect(page.locator(".msg.user .bubble")).to_have_text("Who are my newest contacts?")
    await answer_done(page)
    await expect(page.get_by_role("list", name="Suggestions")).to_be_hidden()


async def test_a_broker_without_a_crm_location_gets_no_crm_prompts(
    browsing: Browsing, broker: AppUser, users: Any
) -> None:
    unlinked = await users.create()
    page = await browsing.page(unlinked)
    await page.goto("/chat")
    await expect(page.get_by_role("textbox", name="Message")).to_be_enabled()
    await expect(page.get_by_role("list", name="Suggestions")).to_be_hidden()


WIDE_TABLE = (
    "| Contact | Company | E-mail | Phone | Stage | Next step |\n"
    "|---|---|---|---|---|---|\n"
    "| Dana Whitfield | North Pier Logistics | dana@northpier.example | +15551234567 "
    "| Negotiation | Send the lease draft on Friday |\n"
)


@pytest.mark.parametrize("size", ["desktop", "phone"])
async def test_code_blocks_copy_and_wide_tables_scroll_inside_the_answer(
    browsing: Browsing, broker: AppUser, fake_anthropic: FakeAnthropic, size: str
) -> None:
    code = 'curl -H "Version: 2021-07-28" https://services.example/contacts'
    fake_anthropic.script(Reply(text=f"Run this:\n\n```\n{code}\n```\n\n{WIDE_TABLE}"))
    page = await browsing.page(broker, VIEWPORTS[size])
    await page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    await page.goto("/chat")
    await send(page, "Show me the request and my contacts")
    await answer_done(page)
    answer = page.locator(".msg.assistant .markdown")
    await expect(answer).to_contain_text("Run this")
    await answer.get_by_role("button", name="Copy code").click()
    assert await page.evaluate("navigator.clipboard.readText()") == code + "\n"

    table = answer.get_by_role("region", name="Table")
    await expect(table.locator("th")).to_have_count(6)
    widths = await table.evaluate("box => [box.scrollWidth, box.clientWidth]")
    if size == "phone":
        assert widths[0] > widths[1]  # the table is wider than the phone: its box scrolls
    page_width = await page.evaluate("[document.documentElement.scrollWidth, innerWidth]")
    assert page_width[0] <= page_width[1]  # the page itself never does
