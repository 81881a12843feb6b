"""An answer keeps its shape: text blocks and tool cards in the order they happened, live and
after a reload, and Copy gives the text blocks a blank line apart; a message the chat refuses
(too long, or refused by the service) is kept in the composer and never shown as sent."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from playwright.async_api import Page, expect

from tests.browser.conftest import VIEWPORTS, Browsing
from tests.browser.test_chat_page import answer_done, send
from tests.conftest import AppUser
from tests.fakes.llm import FakeAnthropic, Reply, ToolUse

CONVERSATIONS = "/api/v1/control-center/conversations"
LIMIT = 32_000


async def answer_shape(page: Page) -> list[tuple[str, str]]:
    """The last answer's blocks in order: ("text", its text) or ("tool", the tool's name)."""
    blocks = page.locator("article.msg.assistant").last.locator(
        ".answer-body > .markdown, .answer-body > .tool-card"
    )
    shape = []
    for block in await blocks.all():
        if "tool-card" in (await block.get_attribute("class") or ""):
            shape.append(("tool", await block.get_attribute("data-tool") or ""))
        else:
            shape.append(("text", (await block.inner_text()).strip()))
    return shape


async def copied(page: Page) -> str:
    await page.locator("article.msg.assistant").last.get_by_role("button", name="Copy").click()
    return str(await page.evaluate("navigator.clipboard.readText()"))


async def conversations(browsing: Browsing, user: AppUser) -> list[dict[str, Any]]:
    async with httpx.AsyncClient(base_url=browsing.server.url) as http:
        got = await http.get(CONVERSATIONS, headers=user.headers)
    return list(got.json()["conversations"])


def two_steps(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.script(
        Reply(
            text="Let me look that up in your CRM (calendar).",
            tool_uses=[ToolUse("calendars_get-calendar-events", {"calendarId": "cal1"})],
        ),
        Reply(text="**Coming up** in the next two weeks: nothing."),
    )


EXPECTED_SHAPE = [
    ("text", "Let me look that up in your CRM (calendar)."),
    ("tool", "calendars_get-calendar-events"),
    ("text", "Coming up in the next two weeks: nothing."),
]
EXPECTED_COPY = (
    "Let me look that up in your CRM (calendar).\n\n**Coming up** in the next two weeks: nothing."
)


async def test_copy_joins_the_live_answers_text_blocks_with_a_blank_line(
    browsing: Browsing, broker: AppUser, fake_anthropic: FakeAnthropic
) -> None:
    two_steps(fake_anthropic)
    page = await browsing.page(broker)
    await page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    await page.goto("/chat")
    await send(page, "What is on my calendar?")
    await answer_done(page)
    assert await answer_shape(page) == EXPECTED_SHAPE
    assert await copied(page) == EXPECTED_COPY


async def test_a_reloaded_answer_looks_exactly_like_the_live_one(
    browsing: Browsing, broker: AppUser, fake_anthropic: FakeAnthropic
) -> None:
    two_steps(fake_anthropic)
    page = await browsing.page(broker)
    await page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    await page.goto("/chat")
    await send(page, "What is on my calendar?")
    await answer_done(page)
    live = await answer_shape(page)
    await page.reload()
    await expect(page.locator("article.msg.assistant .tool-card")).to_have_count(1)
    assert await answer_shape(page) == live == EXPECTED_SHAPE
    assert await copied(page) == EXPECTED_COPY


@pytest.mark.parametrize("size", ["desktop", "phone"])
async def test_an_over_long_message_is_refused_before_sending_and_kept(
    browsing: Browsing, broker: AppUser, fake_anthropic: FakeAnthropic, size: str
) -> None:
    page = await browsing.page(broker, VIEWPORTS[size])
    await page.goto("/chat")
    box = page.get_by_role("textbox", name="Message")
    count = page.locator("#message-count")

    await box.fill("a" * 1000)
    await expect(count).to_be_hidden()
    await box.fill("é" * (LIMIT - 100))
    await expect(count).to_have_text("31,900 of 32,000 characters")
    await expect(box).to_have_attribute("aria-describedby", "message-count")
    text = "word " * (LIMIT // 5) + "over"
    await box.fill(text)
    await expect(count).to_have_text("32,004 of 32,000 characters: 4 too many to send")

    sent: list[str] = []
    page.on(
        "request", lambda request: sent.append(request.url) if "/chat?" in request.url else None
    )
    await page.get_by_role("button", name="Send").click()
    alert = page.locator("#composer-error")
    await expect(alert).to_have_text(
        "This message is too long to send: it has 32,004 characters, and a message can have at"
        " most 32,000 (about 5,000 words). Shorten it or send it in parts."
    )
    await expect(box).to_have_value(text)
    await expect(page.locator("article.msg")).to_have_count(0)
    assert sent == []
    assert fake_anthropic.requests == []

    # Shortened under the limit: the notice goes, and the message is sent.
    fake_anthropic.script(Reply(text="Noted."))
    await box.fill("Short now.")
    await expect(alert).to_be_hidden()
    await expect(count).to_be_hidden()
    await page.get_by_role("button", name="Send").click()
    await answer_done(page)
    await expect(page.locator("article.msg.user .bubble")).to_have_text(["Short now."])


async def test_a_refusal_from_the_service_is_shown_in_its_words_and_nothing_is_kept(
    browsing: Browsing, broker: AppUser, fake_anthropic: FakeAnthropic
) -> None:
    """A refusal before the answer starts is shown as the service words it (here the page's
    own limit is raised above the service's, so the service is the one that refuses), the
    message stays in the composer and leaves the page, nothing is stored, and a Regenerate
    afterwards answers the last message that was sent."""
    fake_anthropic.script(Reply(text="Dana Whitfield."))
    page = await browsing.page(broker)
    await page.add_init_script(
        "document.addEventListener('DOMContentLoaded',"
        " () => { document.body.dataset.messageMax = '64000'; })"
    )
    await page.goto("/chat")
    await send(page, "Who is Dana?")
    await answer_done(page)
    await page.wait_for_url("**/chat/*")
    conversation_id = page.url.rsplit("/", 1)[1]

    long_text = "x" * (LIMIT + 1)
    box = page.get_by_role("textbox", name="Message")
    await box.fill(long_text)
    await page.get_by_role("button", name="Send").click()
    await expect(page.locator("#composer-error")).to_have_text(
        f"Message too long: at most {LIMIT} characters"
    )
    await expect(box).to_have_value(long_text)
    await expect(page.locator("article.msg")).to_have_count(2)
    await expect(page.get_by_text("could not answer")).to_have_count(0)
    await expect(page.locator("article.msg.user").get_by_role("button", name="Edit")).to_have_count(
        1
    )
    async with httpx.AsyncClient(base_url=browsing.server.url) as http:
        got = await http.get(f"{CONVERSATIONS}/{conversation_id}", headers=broker.headers)
    assert [m["content"] for m in got.json()["conversation"]["messages"]] == [
        "Who is Dana?",
        "Dana Whitfield.",
    ]

    fake_anthropic.script(Reply(text="Dana Whitfield, tenant rep."))
    await page.get_by_role("button", name="Regenerate").click()
    await answer_done(page)
    await expect(page.locator("article.msg.assistant .markdown")).to_have_text(
        ["Dana Whitfield, tenant rep."]
    )
    assert "Who is Dana?" in json.dumps(fake_anthropic.requests[-1])


async def test_an_empty_edit_is_not_sent_and_says_why(
    browsing: Browsing, broker: AppUser, fake_anthropic: FakeAnthropic
) -> None:
    fake_anthropic.script(Reply(text="Dana Whitfield."))
    page = await browsing.page(broker)
    await page.goto("/chat")
    await send(page, "Who is Dana?")
    await answer_done(page)
    await page.locator("article.msg.user").get_by_role("button", name="Edit").click()
    box = page.get_by_role("textbox", name="Edit message")
    await box.fill("   ")
    await page.get_by_role("button", name="Resend").click()
    await expect(page.locator(".edit-form [role=alert]")).to_have_text(
        "The message cannot be empty: write what to send instead, or Cancel to keep it as it is."
    )
    await expect(box).to_have_attribute("aria-invalid", "true")
    await expect(page.locator("article.msg.assistant")).to_have_count(1)
    assert len(fake_anthropic.requests) == 1


async def test_a_tool_without_a_title_is_named_by_its_whole_name_in_words(
    browsing: Browsing, broker: AppUser, fake_anthropic: FakeAnthropic
) -> None:
    fake_anthropic.script(
        Reply(tool_uses=[ToolUse("contacts_lookup", {"query": "Dana"})]),
        Reply(text="No such tool."),
    )
    page = await browsing.page(broker)
    await page.goto("/chat")
    await send(page, "Look Dana up")
    await answer_done(page)
    await expect(page.locator(".tool-card .tool-name")).to_have_text(["Contacts lookup"])
