"""Settings never destroy a secret: the masked form PUT back changes nothing, and
one setting is cleared only by DELETE /api/v1/admin/settings/{name}."""

from __future__ import annotations

import httpx
import pytest

from tests.admin_settings.test_settings_values import NAMES
from tests.conftest import RunningServer, UserFactory
from tests.dbtools import snapshot

URL = "/api/v1/admin/settings"
FORBIDDEN = {"error": "Forbidden"}


async def stored(server: RunningServer) -> dict[str, str]:
    return await server.settings.get_many(NAMES)


async def test_get_then_put_of_the_whole_body_changes_nothing(
    client: httpx.AsyncClient, server: RunningServer, users: UserFactory
) -> None:
    admin = await users.create("super_admin")
    values = {name: f"{name}-value-{i:02d}-WXYZ" for i, name in enumerate(NAMES)}
    values["notificationEmail"] = "ops@example.com"
    values["providerAApiKey"] = "short-key"  # shown as a bare "••••"
    del values["tasksApiKey"]  # unset: shown as ""
    assert (await client.put(URL, json=values, headers=admin.headers)).status_code == 200
    before = await stored(server)

    shown = (await client.get(URL, headers=admin.headers)).json()["settings"]
    assert shown["crmPrivateToken"] == "••••WXYZ" and shown["providerAApiKey"] == "••••"
    response = await client.put(URL, json=shown, headers=admin.headers)

    assert (response.status_code, response.json()) == (200, {"success": True})
    assert await stored(server) == before
    assert (await client.get(URL, headers=admin.headers)).json()["settings"] == shown


async def test_a_mask_never_replaces_a_secret_but_a_new_value_does(
    client: httpx.AsyncClient, server: RunningServer, users: UserFactory
) -> None:
    admin = await users.create("super_admin")
    key = "sk-ant-api03-original-1111"
    await client.put(URL, json={"providerAApiKey": key}, headers=admin.headers)
    # A stale mask (another administrator changed the key since this GET) is no key either.
    for masked in ("••••1111", "••••", "••••9999"):
        await client.put(URL, json={"providerAApiKey": masked}, headers=admin.headers)
        assert (await stored(server))["providerAApiKey"] == key, masked
    await client.put(URL, json={"providerAApiKey": "sk-ant-api03-new-2222"}, headers=admin.headers)
    assert (await stored(server))["providerAApiKey"] == "sk-ant-api03-new-2222"
    # Only secrets are masked: other settings store a mask-like text as it is.
    await client.put(URL, json={"tagHighGCI": "••••VIP1"}, headers=admin.headers)
    assert (await stored(server))["tagHighGCI"] == "••••VIP1"
    # A longer value that merely starts with the mask is a value, not a mask.
    await client.put(URL, json={"tasksApiKey": "••••12345"}, headers=admin.headers)
    assert (await stored(server))["tasksApiKey"] == "••••12345"


async def test_delete_clears_one_setting(
    client: httpx.AsyncClient, server: RunningServer, users: UserFactory
) -> None:
    admin = await users.create("super_admin")
    await client.put(
        URL,
        json={"crmPrivateToken": "pit-0123456789abcd", "tagHighGCI": "VIP"},
        headers=admin.headers,
    )
    response = await client.delete(f"{URL}/crmPrivateToken", headers=admin.headers)
    assert (response.status_code, response.json()) == (200, {"success": True})
    shown = (await client.get(URL, headers=admin.headers)).json()["settings"]
    assert shown["crmPrivateToken"] == "" and shown["tagHighGCI"] == "VIP"
    assert "crmPrivateToken" not in await stored(server)
    # Clearing what is already clear is the same success.
    again = await client.delete(f"{URL}/crmPrivateToken", headers=admin.headers)
    assert (again.status_code, again.json()) == (200, {"success": True})


@pytest.mark.parametrize("name", ["nope", "CRMPRIVATETOKEN", "crmPrivateToken ", "%00"])
async def test_delete_of_an_unknown_name_is_404(
    client: httpx.AsyncClient, server: RunningServer, users: UserFactory, name: str
) -> None:
    admin = await users.create("super_admin")
    before = await snapshot(server.db)
    response = await client.delete(f"{URL}/{name}", headers=admin.headers)
    assert (response.status_code, response.json()) == (404, {"error": "Unknown setting"})
    assert await snapshot(server.db) == before


@pytest.mark.parametrize("role", ["user", "admin", None])
async def test_delete_needs_a_super_administrator(
    client: httpx.AsyncClient, server: RunningServer, users: UserFactory, role: str | None
) -> None:
    admin = await users.create("super_admin")
    await client.put(URL, json={"tagHighGCI": "VIP"}, headers=admin.headers)
    headers = (await users.create(role)).headers if role else {}
    before = await snapshot(server.db)
    for name in ("tagHighGCI", "nope"):  # 403 comes before 404
        response = await client.delete(f"{URL}/{name}", headers=headers)
        assert (response.status_code, response.json()) == (403, FORBIDDEN)
    assert await snapshot(server.db) == before
