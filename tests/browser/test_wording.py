"""Every message a form shows is written for a person: the field's name and the rule in words,
never pydantic's "String should have at least 1 character"."""

from __future__ import annotations

from playwright.async_api import expect

from tests.browser.conftest import Browsing
from tests.browser.test_chat_page import answer_done, send
from tests.conftest import AppUser, UserFactory
from tests.fakes.llm import FakeAnthropic, Reply

RAW = "should have"


async def test_the_users_forms_say_what_is_wrong_in_words(
    browsing: Browsing, users: UserFactory
) -> None:
    admin = await users.create("super_admin")
    page = await browsing.page(admin)
    await page.goto("/admin/users")
    form = page.locator("#create-user")
    await form.get_by_role("button", name="Create user").click()
    await expect(page.locator("#error-email")).to_have_text("Email cannot be empty.")
    await form.get_by_label("Email").fill("no-at-sign")
    await form.get_by_role("button", name="Create user").click()
    await expect(page.locator("#error-email")).to_have_text(
        "Email must be an e-mail address, like name@example.com."
    )
    await form.get_by_label("Email").fill("new.broker@example.com")
    await form.get_by_label("Password").fill("short")
    await form.get_by_role("button", name="Create user").click()
    await expect(page.locator("#error-password")).to_have_text(
        "Password needs at least 12 characters."
    )
    await expect(page.get_by_text(RAW)).to_have_count(0)


async def test_an_empty_title_and_an_over_long_label_are_refused_in_words(
    browsing: Browsing, broker: AppUser, fake_anthropic: FakeAnthropic
) -> None:
    fake_anthropic.script(Reply(text="Dana Whitfield."))
    page = await browsing.page(broker)
    await page.goto("/chat")
    await send(page, "Who is Dana?")
    await answer_done(page)
    await page.get_by_role("button", name="Rename").click()
    await page.get_by_role("textbox", name="Title").fill("   ")
    await page.get_by_role("button", name="Save").click()
    await expect(page.locator("#rename-error")).to_have_text("The title cannot be empty.")

    await page.goto("/account")
    await page.get_by_label("Label").fill("x" * 300)
    await page.get_by_role("button", name="Create token").click()
    await expect(page.get_by_role("alert").filter(has_text="token")).to_contain_text(
        "The token was not created: The label can have at most"
    )
    await expect(page.get_by_text(RAW)).to_have_count(0)
