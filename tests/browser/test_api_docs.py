"""/docs and /redoc in the browser under their Content-Security-Policy: each renders the
interface description, and nothing of their own is refused (a refusal is a console error,
which fails the test through the `browsing` fixture)."""

from __future__ import annotations

from playwright.async_api import ConsoleMessage, expect

from tests.browser.conftest import Browsing

REDOCLY_CDN = "https://cdn.redoc.ly/"


def refusal(message: ConsoleMessage) -> bool:
    return "Content Security Policy" in message.text


async def test_swagger_ui_renders_under_its_policy(browsing: Browsing) -> None:
    page = await browsing.page()
    refused: list[str] = []
    page.on("console", lambda msg: refused.append(msg.text) if refusal(msg) else None)
    response = await page.goto("/docs")
    assert response is not None
    assert "frame-ancestors 'none'" in response.headers["content-security-policy"]
    await expect(page.get_by_text("/api/v1/auth/login").first).to_be_visible()
    assert refused == []


async def test_redoc_renders_under_its_policy(browsing: Browsing) -> None:
    page = await browsing.page()
    refused: list[str] = []
    page.on("console", lambda msg: refused.append(msg.text) if refusal(msg) else None)
    # ReDoc's "API docs by Redocly" footer asks for its logo from Redocly's CDN: the policy
    # refuses it (the link shows without its picture). Nothing else is refused.
    async with page.expect_console_message(
        lambda msg: refusal(msg) and REDOCLY_CDN in msg.text
    ) as logo:
        await page.goto("/redoc")
        await expect(page.get_by_role("heading", name="Control Center").first).to_be_visible()
    await page.get_by_placeholder("Search").fill("login")
    await expect(page.get_by_role("menuitem").filter(has_text="Login").first).to_be_visible()
    text = (await logo.value).text
    assert refused == [text]
    browsing.errors.remove(text)
