"""`SettingsStore.get_many`, one read of the names asked for with memoised decryption, and
`SettingsStore.change`, a value written as a change of the stored one (admin_settings/store.py):
the same answers as reading the rows, on both databases."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from controlcenter.admin_settings.models import Setting
from controlcenter.admin_settings.store import SettingsDecryptError, SettingsStore
from controlcenter.db import utcnow
from tests.conftest import RunningServer, UserFactory
from tests.dbtools import reading, writing

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


class _Appending:
    """A change that appends "+mine" to the stored value, recording each value it was given."""

    def __init__(self) -> None:
        self.given: list[str | None] = []

    def __call__(self, stored: str | None) -> str:
        self.given.append(stored)
        return f"{stored or ''}+mine"


async def test_a_change_is_made_on_the_stored_value_not_the_kept_one(
    server: RunningServer, users: UserFactory
) -> None:
    admin = await users.create("super_admin")
    store = server.settings
    await _save(server, admin.id, {"crmAgencyId": "kept"})
    assert await store.get("crmAgencyId") == "kept"
    async with writing(server.db) as session:  # another process's save, not yet seen here
        await session.execute(
            text("UPDATE settings SET value_encrypted = :value WHERE name = 'crmAgencyId'"),
            {"value": store.cipher.encrypt("theirs")},
        )
    assert await store.get("crmAgencyId") == "kept"

    change = _Appending()
    written = await server.db.run_write(store.change, "crmAgencyId", change, admin.id)

    assert (written, change.given) == ("theirs+mine", ["theirs"])
    assert await store.get("crmAgencyId") == "theirs+mine"  # this process forgot what it kept
    assert await server.db.run_write(store.change, "mcpServerUrl", change, admin.id) == "+mine"
    assert change.given[-1] is None  # unset


async def _until_one_waits_for_a_lock(server: RunningServer) -> None:
    """Until a connection to the test's PostgreSQL database waits for a lock, bounded."""
    async with asyncio.timeout(10):
        while True:
            async with reading(server.db) as session:
                waiting = await session.scalar(
                    text(
                        "SELECT count(*) FROM pg_stat_activity "
                        "WHERE datname = current_database() AND wait_event_type = 'Lock'"
                    )
                )
            if waiting:
                return
            await asyncio.sleep(0.01)


async def _adding(
    session: AsyncSession, store: SettingsStore, name: str, value: str, user_id: str
) -> None:
    """`name` set to `value` in `session`'s transaction, not yet committed: the row another
    administrator's first save is adding."""
    session.add(
        Setting(
            name=name,
            value_encrypted=store.cipher.encrypt(value),
            updated_by=user_id,
            updated_at=utcnow(),
        )
    )
    await session.flush()


async def test_a_change_of_a_value_added_meanwhile_is_made_on_the_added_one(
    server: RunningServer, users: UserFactory
) -> None:
    """On PostgreSQL a missing row cannot be locked: the change reads none, and its insert
    meets the row another transaction is adding. It is made again on that row once committed."""
    admin = await users.create("super_admin")
    store = server.settings
    change = _Appending()
    async with writing(server.db) as session:
        await _adding(session, store, "crmAgencyId", "theirs", admin.id)
        changing = asyncio.create_task(
            server.db.run_write(store.change, "crmAgencyId", change, admin.id)
        )
        if not server.db.is_sqlite:  # SQLite's writer waits for this transaction to begin
            await _until_one_waits_for_a_lock(server)  # the change's insert, for this one

    assert await changing == "theirs+mine"
    assert change.given == (["theirs"] if server.db.is_sqlite else [None, "theirs"])
    assert await store.get("crmAgencyId") == "theirs+mine"


async def test_a_first_save_meeting_a_row_added_meanwhile_updates_it(
    server: RunningServer, users: UserFactory
) -> None:
    """Two first saves of one name at once: the second meets the row the first is adding
    (on PostgreSQL it waits for it) and updates it once committed, instead of failing on the
    name's key."""
    admin = await users.create("super_admin")
    store = server.settings
    async with writing(server.db) as session:
        await _adding(session, store, "crmAgencyId", "theirs", admin.id)
        saving = asyncio.create_task(_save(server, admin.id, {"crmAgencyId": "mine"}))
        if not server.db.is_sqlite:  # SQLite's writer waits for this transaction to begin
            await _until_one_waits_for_a_lock(server)  # the save's insert, for this one

    await saving
    assert await store.get("crmAgencyId") == "mine"
