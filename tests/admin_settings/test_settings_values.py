"""Reading and saving settings: names, masking, dropping empties, the accessor."""

from __future__ import annotations

import httpx
from sqlalchemy import select

from controlcenter.admin_settings.models import Setting
from controlcenter.admin_settings.names import SettingName
from tests.conftest import RunningServer, UserFactory
from tests.dbtools import reading

URL = "/api/v1/admin/settings"

# The 21 settings, in the order GET answers them.
NAMES: list[SettingName] = [
    "crmAgencyApiKey",
    "crmAgencyId",
    "crmPrivateToken",
    "crmOwnerLocationId",
    "crmWebhookSecret",
    "tagHighGCI",
    "tagOnboardingComplete",
    "tagDFYRequested",
    "paymentSecretKey",
    "paymentWebhookSecret",
    "tasksApiKey",
    "tasksListId",
    "dfyPriceFullSetup",
    "dfyPriceSmsSetup",
    "dfyPriceEmailSetup",
    "schedulingCoachingLink",
    "schedulingTeamLink",
    "notificationEmail",
    "providerAApiKey",
    "providerBApiKey",
    "mcpServerUrl",
]
# The secrets: GET masks them.
SECRETS = {
    "crmAgencyApiKey",
    "crmPrivateToken",
    "crmWebhookSecret",
    "paymentSecretKey",
    "paymentWebhookSecret",
    "tasksApiKey",
    "providerAApiKey",
    "providerBApiKey",
}


async def test_get_lists_all_21_names_empty_when_unset(
    client: httpx.AsyncClient, users: UserFactory
) -> None:
    admin = await users.create("super_admin")
    response = await client.get(URL, headers=admin.headers)
    assert response.status_code == 200
    assert response.json() == {"settings": dict.fromkeys(NAMES, "")}
    assert list(response.json()["settings"]) == NAMES


async def test_secrets_are_masked_and_the_rest_returned_as_stored(
    client: httpx.AsyncClient, users: UserFactory
) -> None:
    admin = await users.create("super_admin")
    long_values = {name: f"{name}-value-ABCD{index:02d}" for index, name in enumerate(NAMES)}
    long_values["notificationEmail"] = "ops@example.com"
    response = await client.put(URL, json=long_values, headers=admin.headers)
    assert (response.status_code, response.json()) == (200, {"success": True})
    shown = (await client.get(URL, headers=admin.headers)).json()["settings"]
    assert list(shown) == NAMES
    for name in NAMES:
        expected = "••••" + long_values[name][-4:] if name in SECRETS else long_values[name]
        assert shown[name] == expected, name
    # Short secrets reveal nothing; 12 characters is the first length that shows the last 4.
    short = {
        "providerAApiKey": "abcdefghijk",
        "providerBApiKey": "abcdefghijkl",
        "tasksApiKey": "x",
    }
    await client.put(URL, json=short, headers=admin.headers)
    shown = (await client.get(URL, headers=admin.headers)).json()["settings"]
    assert shown["providerAApiKey"] == "••••"
    assert shown["providerBApiKey"] == "••••ijkl"
    assert shown["tasksApiKey"] == "••••"


async def test_empty_and_absent_values_do_not_clear(
    client: httpx.AsyncClient, users: UserFactory
) -> None:
    admin = await users.create("super_admin")
    first = {"tagHighGCI": "High GCI", "notificationEmail": "a@example.com", "crmAgencyId": "ag1"}
    await client.put(URL, json=first, headers=admin.headers)
    response = await client.put(
        URL,
        json={"tagHighGCI": "", "notificationEmail": "", "crmAgencyId": "ag2"},
        headers=admin.headers,
    )
    assert (response.status_code, response.json()) == (200, {"success": True})
    shown = (await client.get(URL, headers=admin.headers)).json()["settings"]
    assert (shown["tagHighGCI"], shown["notificationEmail"], shown["crmAgencyId"]) == (
        "High GCI",
        "a@example.com",
        "ag2",
    )


async def test_unknown_keys_are_ignored_and_not_stored(
    client: httpx.AsyncClient, server: RunningServer, users: UserFactory
) -> None:
    admin = await users.create("super_admin")
    response = await client.put(
        URL,
        json={"bogus": "x", "__proto__": {"a": 1}, "tagDFYRequested": "DFY"},
        headers=admin.headers,
    )
    assert (response.status_code, response.json()) == (200, {"success": True})
    async with reading(server.db) as db:
        names = set((await db.scalars(select(Setting.name))).all())
    assert names == {"tagDFYRequested"}


async def test_saved_with_the_acting_user_and_readable_through_the_accessor(
    client: httpx.AsyncClient, server: RunningServer, users: UserFactory
) -> None:
    first, second = await users.create("super_admin"), await users.create("super_admin")
    await client.put(URL, json={"providerAApiKey": "sk-ant-one-123456"}, headers=first.headers)
    await client.put(
        URL,
        json={"providerBApiKey": "sk-openai-two-7890", "mcpServerUrl": "http://127.0.0.1:9/mcp"},
        headers=second.headers,
    )
    async with reading(server.db) as db:
        rows = {row.name: row.updated_by for row in (await db.scalars(select(Setting))).all()}
    assert rows == {
        "providerAApiKey": first.id,
        "providerBApiKey": second.id,
        "mcpServerUrl": second.id,
    }
    settings = server.settings
    assert await settings.get("providerAApiKey") == "sk-ant-one-123456"
    assert await settings.get("providerBApiKey") == "sk-openai-two-7890"
    assert await settings.get("tagHighGCI") is None


async def test_a_valid_email_is_saved_as_given(
    client: httpx.AsyncClient, server: RunningServer, users: UserFactory
) -> None:
    admin = await users.create("super_admin")
    for email in ("Ops.Team+cc@Example.COM", "größe@bücher.example"):
        response = await client.put(URL, json={"notificationEmail": email}, headers=admin.headers)
        assert (response.status_code, response.json()) == (200, {"success": True}), email
        assert await server.settings.get("notificationEmail") == email


async def test_only_the_empty_string_counts_as_empty(
    client: httpx.AsyncClient, server: RunningServer, users: UserFactory
) -> None:
    admin = await users.create("super_admin")
    response = await client.put(
        URL, json={"tagHighGCI": "", "tasksListId": ""}, headers=admin.headers
    )
    assert (response.status_code, response.json()) == (200, {"success": True})
    async with reading(server.db) as db:
        assert (await db.scalars(select(Setting.name))).all() == []
    await client.put(URL, json={"tagHighGCI": " "}, headers=admin.headers)
    assert await server.settings.get("tagHighGCI") == " "
