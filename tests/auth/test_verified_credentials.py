"""Credentials recognised from memory (auth/verified.py): after its first check a session, an
API token or a basic credential reads nothing, a hit of a password skips Argon2 and the
throttle, and every change made through the service counts at once in the instance that made
it and within a second in every other one on the same database (another process, another
instance: here a second app with caches of its own)."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import timedelta
from typing import Any

import httpx
import pytest
import uvicorn
from sqlalchemy import event, select, update
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import Session

from controlcenter.accounts.tokens import revoke_token
from controlcenter.accounts.users import (
    OPERATOR,
    UserChanges,
    change_own_password,
    delete_user,
    reset_password,
    update_user,
)
from controlcenter.app import create_app
from controlcenter.auth import service
from controlcenter.auth.models import SUPER_ADMIN, ApiTokenRecord, UserRecord
from controlcenter.auth.passwords import verify_password
from controlcenter.auth.principal import Principal
from controlcenter.auth.service import principal_from_basic, principal_from_bearer
from controlcenter.auth.throttle import SignInThrottle
from controlcenter.auth.verified import (
    CREDENTIALS,
    Known,
    VerifiedCredentials,
    verified_credentials,
)
from controlcenter.common.emails import normalise_email
from controlcenter.config import Config
from controlcenter.db import Database, utcnow
from controlcenter.db.changes import mark_changed
from tests.conftest import TEST_SECRET_KEY, AppUser, RunningServer, UserFactory
from tests.dbtools import reading
from tests.fakes.server import listening_socket

DASHBOARD = "/ocs/v2.php/apps/dashboard/api"
ME = "/api/v1/auth/me"
WITHIN_S = 1.0  # a change is in force everywhere within this time
PATIENCE_S = 10.0  # how long a test waits for it before it fails (a busy machine)


def basic(user: AppUser, password: str | None = None) -> dict[str, str]:
    value = base64.b64encode(f"{user.email}:{password or user.password}".encode()).decode()
    return {"Authorization": f"Basic {value}", "OCS-APIRequest": "true"}


def bearer(credential: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {credential}"}


@pytest.fixture
async def other(server: RunningServer) -> AsyncIterator[Database]:
    """A second instance's database handle on the same database, watching for changes as an
    app does: its own caches, as in another process."""
    database = Database(server.db.url)
    await database.changes.start()
    yield database
    await database.dispose()


@pytest.fixture
async def second(config: Config) -> AsyncIterator[httpx.AsyncClient]:
    """A second app instance on the suite's database (its own lifespan, database handle and
    caches), as another process or another instance would be."""
    app = create_app(config)
    sock = listening_socket("127.0.0.1", 0)
    port = sock.getsockname()[1]
    uv = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False))
    task = asyncio.create_task(uv.serve(sockets=[sock]))
    while not uv.started:
        if task.done():
            task.result()
        await asyncio.sleep(0.01)
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30) as http:
        yield http
    uv.should_exit = True
    await task


async def accepted(database: Database, user: AppUser, password: str | None = None) -> bool:
    principal = await principal_from_basic(database, user.email, password or user.password)
    return principal is not None and principal.user.id == user.id


async def eventually(check: Callable[[], Awaitable[bool]]) -> None:
    """Wait until `check` holds (the other instance's poll or notification), bounded."""
    async with asyncio.timeout(PATIENCE_S):
        while True:
            if await check():
                return
            await asyncio.sleep(WITHIN_S / 10)


async def status(http: httpx.AsyncClient, headers: dict[str, str]) -> int:
    """The dashboard index's status: it takes every kind of credential."""
    return (await http.get(DASHBOARD, headers={**headers, "OCS-APIRequest": "true"})).status_code


def counting_reads(database: Database) -> tuple[list[str], Callable[[], None]]:
    """The statements of the units of work read from now on (`Database.run_read`)."""
    statements: list[str] = []
    engine = database.read_engine

    def seen(*args: Any) -> None:
        statements.append(str(args[2]))

    event.listen(engine, "before_cursor_execute", seen)
    return statements, lambda: event.remove(engine, "before_cursor_execute", seen)


async def lock_out(server: RunningServer, user: AppUser) -> None:
    """Enough recorded failures that an unverified password attempt answers 429."""
    throttle = SignInThrottle.from_config(server.db, server.config)
    for _ in range(throttle.per_email_and_source):
        await throttle.begin(user.email, "127.0.0.1")  # the test client's address


async def test_a_checked_credential_reads_nothing_again(
    server: RunningServer, users: UserFactory
) -> None:
    user = await users.create()
    key = server.config.jwt_key
    statements, stop = counting_reads(server.db)
    try:
        for _ in range(2):  # the first check of each reads, and keeps it
            assert await principal_from_bearer(server.db, user.token, key=key) is not None
            assert await principal_from_bearer(server.db, user.api_token, key=key) is not None
            assert await accepted(server.db, user)
        assert any("users" in statement for statement in statements)
        statements.clear()
        for _ in range(3):
            assert await principal_from_bearer(server.db, user.token, key=key) is not None
            assert await principal_from_bearer(server.db, user.api_token, key=key) is not None
            assert await accepted(server.db, user)
    finally:
        stop()
    assert statements == []


async def test_a_hit_needs_neither_argon2_nor_the_throttle(
    server: RunningServer, client: httpx.AsyncClient, users: UserFactory
) -> None:
    user = await users.create()
    assert (await client.get(DASHBOARD, headers=basic(user))).status_code == 200
    await lock_out(server, user)
    # Only the verified credential passes: a guess still meets the throttle.
    assert (await client.get(DASHBOARD, headers=basic(user))).status_code == 200
    assert (await client.get(DASHBOARD, headers=basic(user, "wrong"))).status_code == 429


async def test_the_cache_holds_no_credential(server: RunningServer, users: UserFactory) -> None:
    user = await users.create()
    cache = verified_credentials(server.db)
    before = len(cache)
    assert await accepted(server.db, user)
    assert await principal_from_bearer(server.db, user.api_token, key="k") is not None
    assert len(cache) == before + 2
    keys = (
        cache.key("basic", normalise_email(user.email), user.password),
        cache.key("token", user.api_token),
    )
    for key in keys:
        known = cache.get(key)
        assert known is not None and known.principal.user.id == user.id
        assert len(key) == 32
        assert user.password.encode() not in key and user.api_token.encode() not in key
        assert set(vars(known)) == {"principal", "expires_at", "token_id", "used_at"}
    # A wrong password or an unknown token is never kept.
    assert not await accepted(server.db, user, "wrong")
    assert await principal_from_bearer(server.db, "cct_unknown", key="k") is None
    assert len(cache) == before + 2


async def test_entries_expire_and_are_bounded(server: RunningServer) -> None:
    now = [0.0]
    cache = VerifiedCredentials(server.db.changes, ttl_s=60, max_entries=100, timer=lambda: now[0])
    known = Known(Principal(user=UserRecord(id="u"), session_id=None))
    cache.keep(cache.reading(), cache.key("basic", "a@example.com", "pw"), known)
    assert cache.get(cache.key("basic", "a@example.com", "pw")) is known
    assert cache.get(cache.key("basic", "a@example.com", "pw2")) is None
    now[0] = 61
    assert cache.get(cache.key("basic", "a@example.com", "pw")) is None
    # A service answering scripts of many accounts for weeks keeps at most `max_entries`.
    for n in range(1_000):
        cache.keep(cache.reading(), cache.key("basic", f"u{n}@example.com", "pw"), known)
    assert len(cache) == 100
    assert cache.get(cache.key("basic", "u999@example.com", "pw")) is known
    assert cache.get(cache.key("basic", "u0@example.com", "pw")) is None


async def test_a_check_that_a_change_overtook_is_not_kept(server: RunningServer) -> None:
    cache = verified_credentials(server.db)
    key = cache.key("basic", "b@example.com", "pw")
    read_under = cache.reading()
    await server.db.run_write(mark_changed, CREDENTIALS)  # a change commits while the check reads
    cache.keep(read_under, key, Known(Principal(user=UserRecord(id="u"), session_id=None)))
    assert cache.get(key) is None


async def test_nothing_is_kept_by_a_process_that_does_not_watch(
    server: RunningServer, users: UserFactory
) -> None:
    user = await users.create()
    unwatched = Database(server.db.url)
    try:
        assert await accepted(unwatched, user)
        assert len(verified_credentials(unwatched)) == 0
    finally:
        await unwatched.dispose()


async def test_a_kept_session_is_refused_once_it_expires(
    server: RunningServer, users: UserFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    user = await users.create()
    key = server.config.jwt_key
    assert await principal_from_bearer(server.db, user.token, key=key) is not None
    later = utcnow() + timedelta(seconds=server.config.session_ttl_s + 1)
    monkeypatch.setattr(service, "utcnow", lambda: later)
    assert await principal_from_bearer(server.db, user.token, key=key) is None


async def test_a_tampered_session_is_refused_and_not_kept(
    server: RunningServer, users: UserFactory
) -> None:
    user = await users.create()
    tampered = user.token[:-2] + ("AA" if not user.token.endswith("AA") else "BB")
    before = len(verified_credentials(server.db))
    assert await principal_from_bearer(server.db, tampered, key=TEST_SECRET_KEY) is None
    assert len(verified_credentials(server.db)) == before


async def test_a_failed_verification_leaves_nobody_waiting(server: RunningServer) -> None:
    cache = VerifiedCredentials(server.db.changes)
    key = cache.key("basic", "a@example.com", "pw")
    with pytest.raises(RuntimeError):
        async with cache.verifying(key):
            raise RuntimeError("the database went away")
    await asyncio.wait_for(cache.settled(key), timeout=1)


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


# Changes made through the service, in force in this instance at once and in the other within
# a second. Each takes the user and both instances' databases, and returns the credentials it
# must have ended (as request headers).
Change = Callable[[RunningServer, AppUser], Awaitable[list[dict[str, str]]]]


async def _password_reset(server: RunningServer, user: AppUser) -> list[dict[str, str]]:
    await reset_password(server.db, user.id, "new-password-1", actor_role=SUPER_ADMIN)
    return [basic(user), bearer(user.token)]


async def _own_password_change(server: RunningServer, user: AppUser) -> list[dict[str, str]]:
    await change_own_password(server.db, user.id, user.password, "changed-pw-2", keep_session=None)
    return [basic(user), bearer(user.token)]


async def _disabled(server: RunningServer, user: AppUser) -> list[dict[str, str]]:
    await update_user(server.db, user.id, UserChanges(disabled=True), actor_role=SUPER_ADMIN)
    return [basic(user), bearer(user.token), bearer(user.api_token)]


async def _deleted(server: RunningServer, user: AppUser) -> list[dict[str, str]]:
    await delete_user(server.db, user.id, actor_role=SUPER_ADMIN)
    return [basic(user), bearer(user.token), bearer(user.api_token)]


async def _token_revoked(server: RunningServer, user: AppUser) -> list[dict[str, str]]:
    async with reading(server.db) as db:
        token_ids = [t.id for t in await _tokens_of(db, user.id)]
    for token_id in token_ids:
        assert await revoke_token(server.db, token_id)
    return [bearer(user.api_token)]


async def _logged_out(server: RunningServer, user: AppUser) -> list[dict[str, str]]:
    async with httpx.AsyncClient(base_url=server.url) as http:
        response = await http.post("/api/v1/auth/logout", headers=bearer(user.token))
        assert response.status_code == 200
    return [bearer(user.token)]


async def _tokens_of(db: AsyncSession, user_id: str) -> list[ApiTokenRecord]:
    query = select(ApiTokenRecord).where(ApiTokenRecord.user_id == user_id)
    return list((await db.scalars(query)).all())


@pytest.mark.parametrize(
    "change",
    [_password_reset, _own_password_change, _disabled, _deleted, _token_revoked, _logged_out],
)
async def test_a_change_counts_here_at_once_and_in_another_instance_within_a_second(
    server: RunningServer,
    client: httpx.AsyncClient,
    second: httpx.AsyncClient,
    users: UserFactory,
    change: Change,
) -> None:
    user = await users.create()
    await users.create(SUPER_ADMIN)  # never the last one
    for http in (client, second):  # each instance checks and keeps them
        for headers in (basic(user), bearer(user.token), bearer(user.api_token)):
            assert await status(http, headers) == 200
            assert await status(http, headers) == 200
    ended = await change(server, user)
    for headers in ended:
        assert await status(client, headers) == 401

    async def refused_there() -> bool:
        return all([await status(second, headers) == 401 for headers in ended])

    await eventually(refused_there)


async def test_a_role_change_counts_in_another_instance(
    server: RunningServer, client: httpx.AsyncClient, second: httpx.AsyncClient, users: UserFactory
) -> None:
    admin = await users.create(SUPER_ADMIN)
    await users.create(SUPER_ADMIN)
    for http in (client, second):
        me = await http.get(ME, headers=bearer(admin.api_token))
        assert me.json()["user"]["role"] == SUPER_ADMIN
    await update_user(server.db, admin.id, UserChanges(role="admin"), actor_role=OPERATOR)
    me = await client.get(ME, headers=bearer(admin.api_token))
    assert me.json()["user"]["role"] == "admin"

    async def demoted_there() -> bool:
        me = await second.get(ME, headers=bearer(admin.api_token))
        return bool(me.json()["user"]["role"] == "admin")

    await eventually(demoted_there)


async def test_a_change_outside_the_service_counts_once_marked(
    server: RunningServer, other: Database, users: UserFactory
) -> None:
    """A write in another process (the command line's, here a handle of its own that does
    not watch) reaches a watching process through the stamps alone."""
    user = await users.create()
    assert await accepted(other, user)
    outside = Database(server.db.url)
    try:

        def disable(session: Session) -> None:
            session.execute(
                update(UserRecord).where(UserRecord.id == user.id).values(disabled=True)
            )
            mark_changed(session, CREDENTIALS)

        await outside.run_write(disable)
    finally:
        await outside.dispose()

    async def refused() -> bool:
        return not await accepted(other, user)

    await eventually(refused)


async def test_a_process_forgets_its_own_change_once(
    server: RunningServer, users: UserFactory
) -> None:
    """Its own write empties this process's caches as it commits; reading the stamps it set,
    or being notified of them, later empties nothing again."""
    user = await users.create()
    await server.db.run_write(mark_changed, CREDENTIALS)
    assert await accepted(server.db, user)  # read, and kept after the change
    # Several polls of the stamps (SQLite), or the change's own notification (PostgreSQL).
    await asyncio.sleep(4 * server.db.changes.poll_s)
    statements, stop = counting_reads(server.db)
    try:
        assert await accepted(server.db, user)
    finally:
        stop()
    assert statements == []
