"""The chat page: streaming, tool cards, errors, deleting, and assistant text that attacks."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest
from playwright.async_api import Page, Route, expect

from tests.browser.conftest import VIEWPORTS, Browsing
from tests.chat.helpers import set_settings
from tests.conftest import AppUser, UserFactory
from tests.fakes.llm import ErrorReply, FakeAnthropic, FakeOpenAI, Reply, ToolUse

CONVERSATIONS = "/api/v1/control-center/conversations"


async def send(page: Page, text: str) -> None:
    await page.get_by_role("textbox", name="Message").fill(text)
    await page.get_by_role("button", name="Send").click()


async def ask(browsing: Browsing, user: AppUser, text: str) -> Page:
    """A new chat page of `user`, with `text` sent."""
    page = await browsing.page(user)
    await page.goto("/chat")
    await send(page, text)
    return page


async def answer_done(page: Page) -> None:
    """An answer is on the page and none is still running (an answer not yet begun is not
    done: under load the first check may come before the page has started it)."""
    await expect(page.locator(".msg.assistant").last).to_be_attached()
    await expect(page.locator(".msg.assistant[aria-busy]")).to_have_count(0)


async def test_a_message_sent_before_the_model_list_arrives_waits_for_it(
    browsing: Browsing, broker: AppUser, fake_anthropic: FakeAnthropic
) -> None:
    fake_anthropic.script(Reply(text="Dana Whitfield."))
    page = await browsing.page(broker)
    release = asyncio.Event()

    async def hold(route: Route) -> None:
        await release.wait()
        await route.continue_()

    await page.route("**/api/v1/control-center/providers", hold)
    await page.goto("/chat")
    await send(page, "Who is Dana?")
    async with page.expect_request("**/api/v1/control-center/chat?*") as sent:
        release.set()
    assert json.loads((await sent.value).post_data or "{}")["provider"] == "provider_a"
    await answer_done(page)
    await expect(page.locator(".msg.assistant .markdown")).to_have_text(["Dana Whitfield."])


async def test_answer_streams_with_two_tool_calls_in_order(
    browsing: Browsing, broker: AppUser, fake_anthropic: FakeAnthropic
) -> None:
    fake_anthropic.script(
        Reply(
            text="Let me check your **CRM**.",
            tool_uses=[
                ToolUse("contacts_get-contacts", {"query": "Dana"}),
                ToolUse("contacts_get-contact", {"contactId": "missingContact01"}),
            ],
        ),
        # The last reply is slow, so the page is seen mid-answer.
        Reply(text="Your contact is *Dana Whitfield*.", delay_s=1.5),
    )
    page = await ask(browsing, broker, "Who is Dana?")

    # While the answer runs: the first text and both cards, each with its outcome.
    running = page.locator(".msg.assistant[aria-busy=true]")
    await expect(running.locator(".markdown strong")).to_have_text("CRM")
    cards = running.locator(".tool-card")
    await expect(cards).to_have_count(2)
    # Each card: the tool's title, its arguments as labelled fields, the raw JSON behind Details.
    await expect(cards.locator(".tool-name")).to_have_text(["Search contacts", "Look up a contact"])
    await expect(cards.nth(0).locator(".tool-args dt")).to_have_text(["Query"])
    await expect(cards.nth(0).locator(".tool-args dd")).to_have_text(["Dana"])
    await expect(cards.nth(1).locator(".tool-args dt")).to_have_text(["Contact id"])
    raw = cards.nth(0).locator(".tool-raw")
    await expect(raw).to_be_hidden()
    await cards.nth(0).get_by_text("Details").click()
    await expect(raw).to_contain_text('"name": "contacts_get-contacts"')
    await expect(raw).to_contain_text('"query": "Dana"')
    await expect(cards.locator(".tool-status")).to_have_text(["Succeeded", "Failed"])
    await expect(cards.nth(1).locator(".tool-error")).not_to_be_empty()
    await expect(page.get_by_role("button", name="Send")).to_be_disabled()

    await answer_done(page)
    answer = page.locator(".msg.assistant")
    await expect(answer.locator(".markdown")).to_have_count(2)  # text, cards, then text again
    await expect(answer.locator(".markdown").nth(1).locator("em")).to_have_text("Dana Whitfield")
    await expect(answer.get_by_role("alert")).to_be_hidden()

    # The conversation got its address and appeared in the list without a reload.
    await page.wait_for_url("**/chat/*")
    conversation_id = page.url.rsplit("/", 1)[1]
    nav = page.get_by_role("navigation", name="Conversations")
    await expect(nav.get_by_role("link", name="Who is Dana?")).to_have_attribute(
        "href", f"/chat/{conversation_id}"
    )

    # Reloaded, the stored conversation shows the same steps and answer.
    await page.reload()
    stored = page.locator(".msg.assistant")
    await expect(stored.locator(".tool-name")).to_have_text(
        ["Search contacts", "Look up a contact"]
    )
    await expect(stored.locator(".tool-status")).to_have_text(["Succeeded", "Failed"])
    await expect(stored.locator(".markdown em")).to_have_text("Dana Whitfield")
    await expect(page.locator(".msg.user .bubble")).to_have_text("Who is Dana?")


async def test_a_stream_error_is_plain_for_a_broker_and_exact_for_an_administrator(
    browsing: Browsing, broker: AppUser, users: UserFactory, fake_anthropic: FakeAnthropic
) -> None:
    fake_anthropic.script(ErrorReply(529, "Overloaded"))
    page = await ask(browsing, broker, "Show me my pipeline")
    # Each step waits for its answer to end before it reads it, so that a slow start (a
    # loaded machine) spends its own wait, not the next assertion's.
    await answer_done(page)
    alert = page.locator(".msg.assistant").get_by_role("alert")
    await expect(alert).to_have_text(
        "The assistant is busy right now. Please try again in a moment."
    )
    await expect(page.get_by_role("button", name="Send")).to_be_enabled()

    # The next message works in the same conversation.
    fake_anthropic.script(Reply(text="Back again."))
    await send(page, "Try again")
    await expect(page.locator(".msg.assistant")).to_have_count(2)
    await answer_done(page)
    await expect(page.locator(".msg.assistant .markdown")).to_have_text("Back again.")

    # An administrator reads the provider's own words and status.
    admin = await users.create("admin")
    fake_anthropic.script(ErrorReply(529, "Overloaded"))
    page = await ask(browsing, admin, "Show me my pipeline")
    await answer_done(page)
    alert = page.locator(".msg.assistant").get_by_role("alert")
    await expect(alert).to_contain_text("Overloaded")
    await expect(alert).to_contain_text("(code 529)")


@pytest.mark.parametrize("size", ["desktop", "phone"])
async def test_without_a_provider_key_the_composer_says_the_assistant_is_not_set_up(
    browsing: Browsing, users: UserFactory, size: str
) -> None:
    user = await users.create()  # no provider key configured
    page = await browsing.page(user, VIEWPORTS[size])
    await page.goto("/chat")
    await expect(page.get_by_text("The assistant is not set up yet")).to_be_visible()
    await expect(page.get_by_role("textbox", name="Message")).to_be_disabled()
    await expect(page.get_by_role("button", name="Send")).to_be_disabled()
    await expect(page.get_by_label("Model")).to_be_hidden()


async def test_only_providers_with_a_key_are_offered(
    browsing: Browsing, broker: AppUser, fake_openai: FakeOpenAI
) -> None:
    page = await browsing.page(broker)
    await page.goto("/chat")
    model = page.get_by_label("Model")
    await expect(model.locator("option")).to_have_text(["Claude"])
    await set_settings(browsing.server, {"providerBApiKey": fake_openai.api_key}, broker)
    await page.reload()
    await expect(model.locator("option")).to_have_text(["Claude", "OpenAI"])
    await expect(page.get_by_text("The assistant is not set up yet")).to_be_hidden()


async def test_delete_asks_first_then_removes_the_conversation(
    browsing: Browsing, broker: AppUser, fake_anthropic: FakeAnthropic
) -> None:
    fake_anthropic.script(Reply(text="Hi there."))
    page = await ask(browsing, broker, "Remember the Okafor lease")
    await answer_done(page)
    await page.wait_for_url("**/chat/*")
    conversation_id = page.url.rsplit("/", 1)[1]
    nav = page.get_by_role("navigation", name="Conversations")
    link = nav.get_by_role("link", name="Remember the Okafor lease")
    await expect(link).to_be_visible()

    await page.get_by_role("button", name="Delete").click()
    dialog = page.get_by_role("dialog", name="Delete this conversation?")
    await expect(dialog).to_be_visible()
    await dialog.get_by_role("button", name="Cancel").click()
    await expect(dialog).to_be_hidden()
    await expect(link).to_be_visible()

    await page.get_by_role("button", name="Delete").click()
    await dialog.get_by_role("button", name="Delete conversation").click()
    await expect(link).to_have_count(0)
    await expect(page.get_by_role("heading", name="New chat")).to_be_visible()
    assert page.url.endswith("/chat")
    async with httpx.AsyncClient(base_url=browsing.server.url) as http:
        gone = await http.get(f"{CONVERSATIONS}/{conversation_id}", headers=broker.headers)
    assert gone.status_code == 404


async def test_an_unknown_conversation_says_so(browsing: Browsing, broker: AppUser) -> None:
    page = await browsing.page(broker)
    await page.goto("/chat/no-such-conversation")
    await expect(page.locator("#page-error")).to_contain_text("does not exist")
    assert page.url.endswith("/chat")


async def test_script_and_javascript_links_in_assistant_text_never_run(
    browsing: Browsing, broker: AppUser, fake_anthropic: FakeAnthropic
) -> None:
    attack = (
        "Hello <script>window.pwned = 'script'</script>\n\n"
        '<img src="x" onerror="window.pwned = \'img\'">\n\n'
        "[click me](javascript:window.pwned='markdown-link')\n\n"
        "<a href=\"javascript:window.pwned='html-link'\">raw link</a>\n\n"
        '<a href="https://example.com/" onclick="window.pwned=\'onclick\'">safe link</a>\n\n'
        "<iframe srcdoc=\"<script>parent.pwned='iframe'</script>\"></iframe>"
    )
    fake_anthropic.script(Reply(text=attack))
    page = await ask(browsing, broker, "Say something nasty")
    await answer_done(page)
    body = page.locator(".msg.assistant .markdown")
    await expect(body).to_contain_text("Hello")
    assert await body.locator("script, iframe, [onerror], [onclick]").count() == 0
    for name in ("click me", "raw link"):
        link = body.get_by_text(name)
        href = await link.get_attribute("href")
        assert href is None or not href.lower().startswith("javascript")
        await link.click()
    await expect(body.get_by_role("link", name="safe link")).to_have_attribute(
        "rel", "noopener noreferrer"
    )
    assert await page.evaluate("window.pwned") is None
    # Stored and reloaded, it is rendered by the same path.
    await page.reload()
    await expect(page.locator(".msg.assistant .markdown")).to_contain_text("Hello")
    assert await page.evaluate("window.pwned") is None
    # DOMPurify parses the text in a document that inherits the page's policy; the inline
    # handlers it meets there are refused by the policy (the second wall), never run.
    blocked = [e for e in browsing.errors if "Content Security Policy" in e and "blocked" in e]
    assert len(blocked) == len(browsing.errors)
    browsing.errors.clear()


async def test_the_chat_works_from_the_keyboard(
    browsing: Browsing, broker: AppUser, fake_anthropic: FakeAnthropic
) -> None:
    fake_anthropic.script(Reply(text="Typed and sent."))
    page = await browsing.page(broker)
    await page.goto("/chat")
    message = page.get_by_role("textbox", name="Message")
    await expect(message).to_be_focused()
    await page.keyboard.type("First line")
    await page.keyboard.press("Shift+Enter")
    await page.keyboard.type("second line")
    await expect(message).to_have_value("First line\nsecond line")
    await page.keyboard.press("Enter")
    await expect(page.locator(".msg.user .bubble")).to_have_text("First line\nsecond line")
    await expect(page.locator(".msg.assistant .markdown")).to_have_text("Typed and sent.")
    # Once the answer has ended (Send is disabled while it runs), Tab reaches Send, whose
    # focus is visible.
    await answer_done(page)
    await message.focus()
    await page.keyboard.press("Tab")
    send = page.get_by_role("button", name="Send")
    await expect(send).to_be_focused()
    shadow = await send.evaluate("element => getComputedStyle(element).boxShadow")
    assert shadow != "none"


async def test_the_reader_picks_the_provider_and_the_choice_is_kept(
    browsing: Browsing, broker: AppUser, fake_openai: FakeOpenAI
) -> None:
    await set_settings(browsing.server, {"providerBApiKey": fake_openai.api_key}, broker)
    fake_openai.script(Reply(text="From the other provider."))
    page = await browsing.page(broker)
    await page.goto("/chat")
    await page.get_by_label("Model").select_option(label="OpenAI")
    await send(page, "Hello")
    await expect(page.locator(".msg.assistant .markdown")).to_have_text("From the other provider.")
    assert len(fake_openai.requests) == 1
    await page.goto("/chat")
    await expect(page.get_by_label("Model")).to_have_value("provider_b")
