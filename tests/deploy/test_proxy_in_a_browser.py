"""A browser signs in and chats through deploy/'s nginx configuration listening on a port that
is not the scheme's default: the origin the browser sends (`https://127.0.0.1:<port>`) matches
the host the proxy passes on, port included, so the cross-origin check lets the writes through.
"""

from __future__ import annotations

from playwright.async_api import Browser, expect

from tests.browser.conftest import browser, chromium  # noqa: F401 (fixtures)
from tests.chat.helpers import set_settings
from tests.conftest import RunningServer, UserFactory
from tests.deploy.test_nginx import Proxy, instances, proxy  # noqa: F401 (fixtures)
from tests.fakes.llm import FakeAnthropic, Reply


async def test_a_browser_signs_in_and_chats_through_the_proxy_on_another_port(
    proxy: Proxy,  # noqa: F811
    browser: Browser,  # noqa: F811
    server: RunningServer,
    users: UserFactory,
    fake_anthropic: FakeAnthropic,
) -> None:
    assert proxy.url.startswith("https://") and not proxy.url.endswith(":443")
    user = await users.create()
    await set_settings(server, {"providerAApiKey": fake_anthropic.api_key}, user)
    fake_anthropic.script(Reply(text="Hello through the proxy."))
    # The proxy's certificate is self-signed for the test: Chromium is told to accept it.
    context = await browser.new_context(base_url=proxy.url, ignore_https_errors=True)
    context.set_default_timeout(15_000)
    try:
        page = await context.new_page()
        await page.goto("/login")
        await page.get_by_label("Email").fill(user.email)
        await page.get_by_label("Password").fill(user.password)
        await page.get_by_role("button", name="Sign in").click()
        await page.wait_for_url("**/chat")
        await page.get_by_role("textbox", name="Message").fill("Hi")
        await page.get_by_role("button", name="Send").click()
        await expect(page.locator(".msg.assistant .markdown")).to_have_text(
            "Hello through the proxy."
        )
    finally:
        await context.close()
