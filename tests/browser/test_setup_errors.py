"""/setup shows the endpoint's field errors beside their field (`details`)."""

from __future__ import annotations

from playwright.async_api import expect

from tests.browser.conftest import Browsing
from tests.conftest import UserFactory


async def test_setup_shows_a_field_error_beside_the_field(
    browsing: Browsing, users: UserFactory
) -> None:
    user = await users.create()
    page = await browsing.page(user)
    await page.goto("/setup")
    form = page.locator("#setup-form")
    await expect(form).not_to_have_attribute("aria-busy", "true")

    # A brokerage name longer than the service keeps: the error is shown beside the field.
    await page.get_by_label("Brokerage name").fill("B" * 501)
    await page.get_by_label("Years in business").fill("12")
    await page.get_by_role("button", name="Save").click()
    field_error = page.locator("#error-brokerageName")
    await expect(field_error).to_be_visible()
    await expect(field_error).not_to_be_empty()
    await expect(page.get_by_label("Brokerage name")).to_have_attribute("aria-invalid", "true")
    await expect(page.locator("#error-yearsInBusiness")).to_be_hidden()
    await expect(page.get_by_role("status")).not_to_have_text("Saved")

    # Corrected, it saves and the error goes.
    await page.get_by_label("Brokerage name").fill("Harbor Commercial Realty")
    await page.get_by_role("button", name="Save").click()
    await expect(page.get_by_role("status")).to_have_text("Saved")
    await expect(field_error).to_be_hidden()
    await expect(page.get_by_label("Brokerage name")).not_to_have_attribute("aria-invalid", "true")
