"""Sign-in, signed-out redirects and roles, in the browser."""

from __future__ import annotations

from playwright.async_api import expect

from tests.browser.conftest import Browsing, sign_in
from tests.conftest import UserFactory
from tests.pages.test_pages import LEAVING_VECTORS


async def test_sign_in_wrong_then_right_returns_to_the_page_asked_for(
    browsing: Browsing, users: UserFactory
) -> None:
    user = await users.create()
    page = await browsing.page()
    await page.goto("/setup")
    assert page.url.endswith("/login?next=/setup")

    await sign_in(page, user.email, "not-the-password")
    alert = page.get_by_role("alert")
    await expect(alert).to_have_text("Wrong e-mail or password.")
    assert page.url.endswith("/login?next=/setup")

    await page.get_by_label("Password").fill(user.password)
    await page.get_by_role("button", name="Sign in").click()
    await page.wait_for_url("**/setup")
    await expect(page.get_by_role("heading", name="Your setup")).to_be_visible()


async def test_signed_out_visits_redirect_to_sign_in(browsing: Browsing) -> None:
    page = await browsing.page()
    for path in ("/chat", "/chat/abc", "/admin/settings", "/admin/users", "/account"):
        await page.goto(path)
        assert page.url == f"{browsing.server.url}/login?next={path}"
        await expect(page.get_by_role("button", name="Sign in")).to_be_visible()
    await page.goto("/")
    assert page.url == f"{browsing.server.url}/login"


async def test_a_broker_is_refused_the_admin_pages(browsing: Browsing, users: UserFactory) -> None:
    broker = await users.create()
    page = await browsing.page(broker)
    for path in ("/admin/settings", "/admin/users"):
        response = await page.goto(path)
        assert response is not None and response.status == 403
        await expect(page.get_by_role("heading", name="Not allowed")).to_be_visible()
    # Nor are they offered in the navigation.
    await page.goto("/chat")
    site = page.get_by_role("navigation", name="Site")
    await expect(site.get_by_role("link", name="Chat")).to_be_visible()
    await expect(site.get_by_role("link", name="Users")).to_have_count(0)
    await expect(site.get_by_role("link", name="Settings")).to_have_count(0)


async def test_an_admin_sees_users_but_not_settings(browsing: Browsing, users: UserFactory) -> None:
    admin = await users.create("admin")
    page = await browsing.page(admin)
    response = await page.goto("/admin/settings")
    assert response is not None and response.status == 403
    response = await page.goto("/admin/users")
    assert response is not None and response.status == 200


async def test_sign_out_ends_the_session(browsing: Browsing, users: UserFactory) -> None:
    user = await users.create()
    page = await browsing.page(user)
    await page.goto("/account")
    await page.get_by_role("button", name="Sign out").click()
    await page.wait_for_url("**/login")
    await page.goto("/chat")
    assert "/login?next=/chat" in page.url


async def test_sign_in_never_leaves_the_site(browsing: Browsing, users: UserFactory) -> None:
    user = await users.create()
    for vector in LEAVING_VECTORS:
        page = await browsing.page()
        await page.goto(f"/login?next={vector}")
        await sign_in(page, user.email, user.password)
        await page.wait_for_url(f"{browsing.server.url}/chat")
        await expect(page.get_by_role("textbox", name="Message")).to_be_visible()


async def test_sign_in_returns_to_a_path_of_the_site_with_its_query(
    browsing: Browsing, users: UserFactory
) -> None:
    user = await users.create()
    page = await browsing.page()
    await page.goto("/login?next=/account%3Ftab%3D1")
    await sign_in(page, user.email, user.password)
    await page.wait_for_url(f"{browsing.server.url}/account?tab=1")
