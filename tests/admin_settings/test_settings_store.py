"""`SettingsStore.get_many`, one read of the names asked for with memoised decryption
(admin_settings/store.py): the same answers as reading the rows, on both databases."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from sqlalchemy import text

from controlcenter.admin_settings.store import SettingsDecryptError
from tests.conftest import RunningServer, UserFactory
from tests.dbtools import writing

USED = ("crmAgencyId", "mcpServerUrl")


@pytest.fixture(autouse=True)
async def unset(server: RunningServer) -> AsyncIterator[None]:
    """The server is the session's: leave none of these set for the next test."""
    yield
    for name in USED:
        await server.db.run_write(server.settings.delete, name)


async def _save(server: RunningServer, user_id: str, values: dict[str, str]) -> None:
    await server.db.run_write(server.settings.save, values, user_id)


async def test_the_set_names_in_any_order_each_once(
    server: RunningServer, users: UserFactory
) -> None:
    admin = await users.create("super_admin")
    await _save(server, admin.id, {"crmAgencyId": "ag-1", "mcpServerUrl": ""})
    store = server.settings

    found = await store.get_many(["mcpServerUrl", "providerBApiKey", "crmAgencyId", "crmAgencyId"])

    assert found == {"mcpServerUrl": "", "crmAgencyId": "ag-1"}  # set, even when empty
    assert list(found) == ["mcpServerUrl", "crmAgencyId"]
    assert await store.get_many([]) == {}


async def test_a_changed_value_is_read_anew(server: RunningServer, users: UserFactory) -> None:
    admin = await users.create("super_admin")
    store = server.settings
    await _save(server, admin.id, {"crmAgencyId": "before"})
    assert await store.get_many(["crmAgencyId"]) == {"crmAgencyId": "before"}

    await _save(server, admin.id, {"crmAgencyId": "after"})

    assert await store.get_many(["crmAgencyId"]) == {"crmAgencyId": "after"}
    assert await store.get("crmAgencyId") == "after"


async def test_a_value_of_another_key_is_a_decrypt_error(
    server: RunningServer, users: UserFactory
) -> None:
    admin = await users.create("super_admin")
    await _save(server, admin.id, {"crmAgencyId": "x"})
    async with writing(server.db) as session:
        await session.execute(
            text(
                "UPDATE settings SET value_encrypted = 'gAAAAAnot-a-token' "
                "WHERE name = 'crmAgencyId'"
            )
        )
    try:
        await server.settings.get_many(["crmAgencyId"])
    except SettingsDecryptError as exc:
        assert str(exc) == "crmAgencyId"
    else:
        raise AssertionError("a damaged value was answered")
