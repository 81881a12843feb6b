"""The verified-credential cache of HTTP basic with an account password (auth/verified.py):
a hit skips Argon2 and the throttle, and every change to the account, made by this instance
or by another one on the same database (another process), counts at the next request."""

from __future__ import annotations

import asyncio
import base64
import time
from collections.abc import AsyncIterator

import httpx
import pytest

from controlcenter.accounts.users import (
    UserChanges,
    change_own_password,
    delete_user,
    reset_password,
    update_user,
)
from controlcenter.auth.models import SUPER_ADMIN
from controlcenter.auth.passwords import verify_password
from controlcenter.auth.service import principal_from_basic
from controlcenter.auth.throttle import SignInThrottle
from controlcenter.auth.verified import VerifiedCredentials, verified_credentials
from controlcenter.db import Database
from tests.conftest import AppUser, RunningServer, UserFactory

DASHBOARD = "/ocs/v2.php/apps/dashboard/api"


def basic(user: AppUser, password: str | None = None) -> dict[str, str]:
    value = base64.b64encode(f"{user.email}:{password or user.password}".encode()).decode()
    return {"Authorization": f"Basic {value}", "OCS-APIRequest": "true"}


@pytest.fixture
async def other(server: RunningServer) -> AsyncIterator[Database]:
    """A second instance's database handle on the same database: its own cache, as in
    another process."""
    database = Database(server.db.url)
    yield database
    await database.dispose()


async def accepted(database: Database, user: AppUser, password: str | None = None) -> bool:
    principal = await principal_from_basic(database, user.email, password or user.password)
    return principal is not None and principal.user.id == user.id


async def lock_out(server: RunningServer, user: AppUser) -> None:
    """Enough recorded failures that an unverified password attempt answers 429."""
    throttle = SignInThrottle.from_config(server.db, server.config)
    for _ in range(throttle.per_email_and_source):
        await throttle.begin(user.email, "127.0.0.1")  # the test client's address


async def test_a_hit_needs_neither_argon2_nor_the_throttle(
    server: RunningServer, client: httpx.AsyncClient, users: UserFactory
) -> None:
    user = await users.create()
    assert (await client.get(DASHBOARD, headers=basic(user))).status_code == 200
    await lock_out(server, user)
    # Only the verified credential passes: a guess still meets the throttle.
    assert (await client.get(DASHBOARD, headers=basic(user))).status_code == 200
    assert (await client.get(DASHBOARD, headers=basic(user, "wrong"))).status_code == 429


async def test_the_cache_holds_no_password(server: RunningServer, users: UserFactory) -> None:
    user = await users.create()
    assert await accepted(server.db, user)
    cache = verified_credentials(server.db)
    entries = [(key, entry) for key, entry in cache._entries.items() if entry[0] == user.id]
    assert len(entries) == 1
    for key, (_, digest) in entries:
        assert user.password.encode() not in key + digest
        assert len(key) == len(digest) == 32
    # A wrong password is never remembered.
    before = len(cache)
    assert not await accepted(server.db, user, "wrong")
    assert len(cache) == before


def test_entries_expire() -> None:
    cache = VerifiedCredentials(ttl_s=0.05)
    cache.remember("a@example.com", "pw", "u1", "hash")
    assert cache.hit("a@example.com", "pw", "u1", "hash")
    assert not cache.hit("a@example.com", "pw", "u1", "other hash")
    assert not cache.hit("a@example.com", "pw", "u2", "hash")
    assert not cache.hit("a@example.com", "pw2", "u1", "hash")
    time.sleep(0.06)
    assert not cache.hit("a@example.com", "pw", "u1", "hash")


def test_a_long_running_process_keeps_at_most_max_entries() -> None:
    # A service answering scripts of many accounts for weeks: the cache is bounded, and the
    # newest entries are the ones kept.
    cache = VerifiedCredentials(max_entries=100)
    for n in range(1_000):
        cache.remember(f"user{n}@example.com", "pw", f"u{n}", "hash")
    assert len(cache) == 100
    assert cache.hit("user999@example.com", "pw", "u999", "hash")
    assert not cache.hit("user0@example.com", "pw", "u0", "hash")


async def test_a_failed_verification_leaves_nobody_waiting() -> None:
    cache = VerifiedCredentials()
    with pytest.raises(RuntimeError):
        async with cache.verifying("a@example.com", "pw"):
            raise RuntimeError("the database went away")
    await asyncio.wait_for(cache.settled("a@example.com", "pw"), timeout=1)


async def test_password_reset_elsewhere_counts_at_once(
    server: RunningServer, other: Database, users: UserFactory
) -> None:
    user = await users.create()
    assert await accepted(server.db, user) and await accepted(other, user)
    await reset_password(server.db, user.id, "new-password-1", actor_role=SUPER_ADMIN)
    assert not [e for e in verified_credentials(server.db)._entries.values() if e[0] == user.id]
    assert not await accepted(server.db, user)
    assert not await accepted(other, user)
    assert await accepted(other, user, "new-password-1")


async def test_own_password_change_elsewhere_counts_at_once(
    server: RunningServer, other: Database, users: UserFactory
) -> None:
    user = await users.create()
    assert await accepted(other, user)
    await change_own_password(server.db, user.id, user.password, "changed-pw-2", keep_session=None)
    assert not await accepted(other, user)
    assert await accepted(other, user, "changed-pw-2")


async def test_disable_elsewhere_counts_at_once(
    server: RunningServer, other: Database, users: UserFactory
) -> None:
    user = await users.create()
    assert await accepted(server.db, user) and await accepted(other, user)
    await update_user(server.db, user.id, UserChanges(disabled=True), actor_role=SUPER_ADMIN)
    assert not await accepted(server.db, user)
    assert not await accepted(other, user)


async def test_delete_elsewhere_counts_at_once(
    server: RunningServer, other: Database, users: UserFactory
) -> None:
    user = await users.create()
    await users.create(SUPER_ADMIN)  # not the last one
    assert await accepted(server.db, user) and await accepted(other, user)
    await delete_user(server.db, user.id, actor_role=SUPER_ADMIN)
    assert not [e for e in verified_credentials(server.db)._entries.values() if e[0] == user.id]
    assert not await accepted(other, user)


async def test_credentials_arriving_together_are_verified_once(
    server: RunningServer, other: Database, users: UserFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    user = await users.create()
    verifications: list[str] = []

    async def counted(password_hash: str | None, password: str) -> bool:
        verifications.append(password)
        return await verify_password(password_hash, password)

    monkeypatch.setattr("controlcenter.auth.service.verify_password", counted)
    assert all(await asyncio.gather(*(accepted(other, user) for _ in range(8))))
    assert verifications == [user.password]
    # A wrong password is never shared: each guess is verified (and counted) on its own.
    assert not any(await asyncio.gather(*(accepted(other, user, "wrong") for _ in range(3))))
    assert verifications == [user.password] + ["wrong"] * 3
