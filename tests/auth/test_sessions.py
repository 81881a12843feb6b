"""Session attacks: every forged, stale or orphaned credential is refused."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import jwt
import pytest
from sqlalchemy import Delete, Update, delete, func, select, update
from sqlalchemy.orm import Session as DbSession
from starlette.requests import Request

from controlcenter.accounts.users import OPERATOR, UserChanges, update_user
from controlcenter.auth.deps import (
    BEARER,
    COOKIE,
    optional_principal,
    require_super_admin,
    require_user,
)
from controlcenter.auth.models import Session, UserRecord
from controlcenter.auth.principal import Principal
from controlcenter.auth.router import NOT_A_SESSION
from controlcenter.auth.service import RequestAuth, start_checked_session, start_session
from controlcenter.db import Database
from controlcenter.web.errors import ApiError
from tests.conftest import TEST_SECRET_KEY, AppUser, RunningServer, UserFactory
from tests.dbtools import writing

ME = "/api/v1/auth/me"
UNAUTHORIZED = (401, {"error": "Unauthorized"})


def b64(data: dict[str, Any]) -> str:
    raw = json.dumps(data, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def claims_of(token: str) -> dict[str, Any]:
    return jwt.decode(token, options={"verify_signature": False})


async def me_with_token(server: RunningServer, token: str) -> list[tuple[int, Any]]:
    """/me with the token as bearer and as cookie: both transports must agree."""
    answers = []
    async with httpx.AsyncClient(base_url=server.url) as http:
        response = await http.get(ME, headers={"Authorization": f"Bearer {token}"})
        answers.append((response.status_code, response.json()))
    async with httpx.AsyncClient(base_url=server.url, cookies={"session": token}) as http:
        response = await http.get(ME)
        answers.append((response.status_code, response.json()))
    return answers


async def assert_refused(server: RunningServer, token: str) -> None:
    assert await me_with_token(server, token) == [UNAUTHORIZED, UNAUTHORIZED]


async def test_valid_session_works_both_ways(server: RunningServer, users: UserFactory) -> None:
    user = await users.create()
    answers = await me_with_token(server, user.token)
    assert [status for status, _ in answers] == [200, 200]
    assert all(body["user"]["id"] == user.id for _, body in answers)


async def test_tampered_signature(server: RunningServer, users: UserFactory) -> None:
    user = await users.create()
    header, payload, signature = user.token.split(".")
    flipped = ("A" if signature[0] != "A" else "B") + signature[1:]
    await assert_refused(server, f"{header}.{payload}.{flipped}")
    await assert_refused(server, f"{header}.{payload}.")


async def test_tampered_payload_keeps_no_signature(
    server: RunningServer, users: UserFactory
) -> None:
    victim = await users.create("super_admin")
    attacker = await users.create()
    header, _, signature = attacker.token.split(".")
    forged = {**claims_of(attacker.token), "sub": victim.id, "sid": claims_of(victim.token)["sid"]}
    await assert_refused(server, f"{header}.{b64(forged)}.{signature}")


async def test_alg_none(server: RunningServer, users: UserFactory) -> None:
    user = await users.create()
    claims = claims_of(user.token)
    for alg in ("none", "None", "NONE"):
        unsigned = f"{b64({'alg': alg, 'typ': 'JWT'})}.{b64(claims)}."
        await assert_refused(server, unsigned)


async def test_other_algorithms_and_keys(server: RunningServer, users: UserFactory) -> None:
    user = await users.create()
    claims = claims_of(user.token)
    await assert_refused(server, jwt.encode(claims, TEST_SECRET_KEY, algorithm="HS512"))
    await assert_refused(server, jwt.encode(claims, "another-key-" + "y" * 40, algorithm="HS256"))
    # The right key and algorithm, but claims the service requires are missing.
    for missing in ("sid", "sub", "exp", "iat"):
        partial = {k: v for k, v in claims.items() if k != missing}
        await assert_refused(server, jwt.encode(partial, TEST_SECRET_KEY, algorithm="HS256"))


async def test_session_of_another_user_under_own_subject(
    server: RunningServer, users: UserFactory
) -> None:
    admin = await users.create("super_admin")
    me = await users.create()
    claims = {**claims_of(me.token), "sid": claims_of(admin.token)["sid"]}
    await assert_refused(server, jwt.encode(claims, TEST_SECRET_KEY, algorithm="HS256"))


async def test_expired_token(server: RunningServer, users: UserFactory) -> None:
    user = await users.create()

    def expired_session(session: DbSession) -> str:
        row = session.get(UserRecord, user.id)
        assert row is not None
        return start_session(session, row, key=TEST_SECRET_KEY, ttl_s=-60)

    expired = await server.db.run_write(expired_session)
    await assert_refused(server, expired)
    # A signature-valid, unexpired token whose session row has expired is refused too.
    sid = claims_of(user.token)["sid"]
    async with writing(server.db) as db:
        await db.execute(
            update(Session)
            .where(Session.id == sid)
            .values(expires_at=datetime.now(UTC) - timedelta(seconds=1))
        )
    await assert_refused(server, user.token)


async def test_token_after_logout_bearer(server: RunningServer, users: UserFactory) -> None:
    user = await users.create()
    async with httpx.AsyncClient(base_url=server.url) as http:
        response = await http.post(
            "/api/v1/auth/logout", headers={"Authorization": f"Bearer {user.token}"}
        )
        assert (response.status_code, response.json()) == (200, {"success": True})
    await assert_refused(server, user.token)


async def test_token_after_logout_cookie(server: RunningServer, users: UserFactory) -> None:
    user = await users.create()
    async with httpx.AsyncClient(base_url=server.url) as http:
        login = await http.post(
            "/api/v1/auth/login", json={"email": user.email, "password": user.password}
        )
        token = login.json()["token"]
        assert (await http.get(ME)).status_code == 200
        response = await http.post("/api/v1/auth/logout")
        assert (response.status_code, response.json()) == (200, {"success": True})
        cleared = response.headers["set-cookie"]
        assert cleared.startswith("session=") and "Max-Age=0" in cleared
        assert "session" not in http.cookies
        response = await http.get(ME)
        assert (response.status_code, response.json()) == UNAUTHORIZED
    await assert_refused(server, token)
    # Other sessions of the same user are untouched by this logout.
    assert [s for s, _ in await me_with_token(server, user.token)] == [200, 200]


async def test_token_of_a_deleted_user(server: RunningServer, users: UserFactory) -> None:
    user = await users.create()
    async with writing(server.db) as db:
        await db.execute(delete(UserRecord).where(UserRecord.id == user.id))
    await assert_refused(server, user.token)
    await assert_refused(server, user.api_token)


# What may happen to a user while sign-in checks their password with no transaction open.
_MEANWHILE: dict[str, Delete | Update] = {
    "deleted": delete(UserRecord),
    "disabled": update(UserRecord).values(disabled=True),
    "given a new password": update(UserRecord).values(password_hash="another-hash"),
}


@pytest.mark.parametrize("meanwhile", list(_MEANWHILE))
async def test_a_session_for_a_user_changed_during_the_password_check_is_refused(
    db: Database, users: UserFactory, meanwhile: str
) -> None:
    """Sign-in checks the password with no transaction open, then records the session only
    while the user's row is as checked: a user deleted, disabled or given a new password in
    between (a reset that revoked every session) gets none, which sign-in answers 401
    `Invalid credentials`. Their row as checked still gets one."""
    user = await users.create()
    record = await db.run_read(_user, user.id)
    assert record is not None
    before = await db.run_read(_sessions_of, user.id)
    async with writing(db) as session:
        await session.execute(_MEANWHILE[meanwhile].where(UserRecord.id == user.id))
    token = await db.run_write(start_checked_session, record, key=TEST_SECRET_KEY, ttl_s=60)
    assert token is None
    assert await db.run_read(_sessions_of, user.id) == (0 if meanwhile == "deleted" else before)


async def test_a_session_for_a_user_as_checked_is_recorded(
    db: Database, users: UserFactory
) -> None:
    user = await users.create()
    record = await db.run_read(_user, user.id)
    assert record is not None
    before = await db.run_read(_sessions_of, user.id)
    token = await db.run_write(start_checked_session, record, key=TEST_SECRET_KEY, ttl_s=60)
    assert token is not None
    assert await db.run_read(_sessions_of, user.id) == before + 1


def _user(session: DbSession, user_id: str) -> UserRecord | None:
    return session.get(UserRecord, user_id)


def _sessions_of(session: DbSession, user_id: str) -> int:
    query = select(func.count()).select_from(Session).where(Session.user_id == user_id)
    return session.execute(query).scalar_one()


async def test_logout_needs_a_session(client: httpx.AsyncClient, users: UserFactory) -> None:
    response = await client.post("/api/v1/auth/logout")
    assert (response.status_code, response.json()) == UNAUTHORIZED
    user = await users.create()
    headers = {"Authorization": f"Bearer {user.token}"}
    assert (await client.post("/api/v1/auth/logout", headers=headers)).status_code == 200
    again = await client.post("/api/v1/auth/logout", headers=headers)
    assert (again.status_code, again.json()) == UNAUTHORIZED


async def test_logout_with_an_api_token_says_how_to_revoke_it(
    client: httpx.AsyncClient, users: UserFactory
) -> None:
    """An API token is no session: sign-out refuses it, never answers success for nothing."""
    user = await users.create()
    headers = {"Authorization": f"Bearer {user.api_token}"}
    response = await client.post("/api/v1/auth/logout", headers=headers)
    assert (response.status_code, response.json()) == (400, {"error": NOT_A_SESSION})
    assert "set-cookie" not in response.headers
    assert (await client.get(ME, headers=headers)).status_code == 200
    assert (await client.get(ME, headers=user.headers)).status_code == 200
    # Beside a session cookie the bearer token decides: the session is not ended either.
    client.cookies.set("session", user.token)
    response = await client.post("/api/v1/auth/logout", headers=headers)
    assert response.status_code == 400
    assert (await client.get(ME, headers=user.headers)).status_code == 200
    client.cookies.clear()
    # What the answer says to do works with the token itself.
    listed = (await client.get("/api/v1/auth/tokens", headers=headers)).json()["tokens"]
    assert len(listed) == 1
    revoked = await client.delete(f"/api/v1/auth/tokens/{listed[0]['id']}", headers=headers)
    assert (revoked.status_code, revoked.json()) == (200, {"success": True})
    assert (await client.get(ME, headers=headers)).status_code == 401


async def test_wrong_bearer_is_not_rescued_by_a_cookie(
    server: RunningServer, users: UserFactory
) -> None:
    user = await users.create()
    async with httpx.AsyncClient(base_url=server.url, cookies={"session": user.token}) as http:
        assert (await http.get(ME)).status_code == 200
        response = await http.get(ME, headers={"Authorization": "Bearer wrong"})
        assert (response.status_code, response.json()) == UNAUTHORIZED


async def test_api_token_in_the_cookie_is_no_session(
    server: RunningServer, users: UserFactory
) -> None:
    user = await users.create()
    async with httpx.AsyncClient(base_url=server.url, cookies={"session": user.api_token}) as http:
        response = await http.get(ME)
        assert (response.status_code, response.json()) == UNAUTHORIZED


@pytest.mark.parametrize(
    "header",
    ["Bearer", "bearer", "Bearer  x y", "Basic abc", "Token x", "Bearer a.b.c", "Bearer ....."],
)
async def test_malformed_authorization(client: httpx.AsyncClient, header: str) -> None:
    response = await client.get(ME, headers={"Authorization": header})
    assert (response.status_code, response.json()) == UNAUTHORIZED


async def test_bearer_scheme_is_case_insensitive(
    client: httpx.AsyncClient, users: UserFactory
) -> None:
    user = await users.create()
    response = await client.get(ME, headers={"Authorization": f"bEaReR {user.token}"})
    assert response.status_code == 200


def request_with(headers: dict[str, str]) -> Request:
    raw = [(k.lower().encode(), v.encode()) for k, v in headers.items()]
    return Request({"type": "http", "method": "GET", "path": "/", "headers": raw})


async def caller(request: Request, auth: RequestAuth) -> Principal | None:
    """`optional_principal` given what FastAPI's security classes read from the request."""
    return await optional_principal(auth, await BEARER(request), await COOKIE(request))


async def test_demoted_super_admin_is_refused_at_once(
    client: httpx.AsyncClient, server: RunningServer, users: UserFactory
) -> None:
    admin: AppUser = await users.create("super_admin")
    await users.create("super_admin")  # not the last one
    request = request_with(admin.headers)
    principal = await caller(request, server.auth)
    assert (await require_super_admin(principal)).user.id == admin.id

    await update_user(server.db, admin.id, UserChanges(role="admin"), actor_role=OPERATOR)

    # Same token, next request: the role comes from the database, not the token.
    me = await client.get(ME, headers=admin.headers)
    assert me.status_code == 200 and me.json()["user"]["role"] == "admin"
    principal = await caller(request_with(admin.headers), server.auth)
    assert principal is not None and (await require_user(principal)).user.id == admin.id
    with pytest.raises(ApiError) as refused:
        await require_super_admin(principal)
    assert (refused.value.status, refused.value.body()) == (403, {"error": "Forbidden"})


async def test_super_admin_dependency_refuses_everyone_else(
    server: RunningServer, users: UserFactory
) -> None:
    with pytest.raises(ApiError) as nobody:
        await require_super_admin(await caller(request_with({}), server.auth))
    assert (nobody.value.status, nobody.value.message) == (403, "Forbidden")
    for role in ("user", "admin"):
        user = await users.create(role)
        for credential in (user.token, user.api_token):
            request = request_with({"Authorization": f"Bearer {credential}"})
            principal = await caller(request, server.auth)
            assert principal is not None
            with pytest.raises(ApiError) as refused:
                await require_super_admin(principal)
            assert (refused.value.status, refused.value.message) == (403, "Forbidden")


async def test_session_lifetime_matches_the_cookie(
    client: httpx.AsyncClient, server: RunningServer, users: UserFactory
) -> None:
    user = await users.create()
    response = await client.post(
        "/api/v1/auth/login", json={"email": user.email, "password": user.password}
    )
    claims = claims_of(response.json()["token"])
    ttl = server.config.session_ttl_s
    assert claims["exp"] - claims["iat"] == ttl
    assert f"Max-Age={ttl}" in response.headers["set-cookie"]
    assert set(claims) == {"sub", "sid", "iat", "exp"}
    assert claims["sub"] == user.id


async def test_each_login_is_its_own_session(client: httpx.AsyncClient, users: UserFactory) -> None:
    user = await users.create()
    body = {"email": user.email, "password": user.password}
    first = (await client.post("/api/v1/auth/login", json=body)).json()["token"]
    second = (await client.post("/api/v1/auth/login", json=body)).json()["token"]
    assert claims_of(first)["sid"] != claims_of(second)["sid"]
    logout = await client.post("/api/v1/auth/logout", headers={"Authorization": f"Bearer {first}"})
    assert logout.status_code == 200
    assert (await client.get(ME, headers={"Authorization": f"Bearer {first}"})).status_code == 401
    assert (await client.get(ME, headers={"Authorization": f"Bearer {second}"})).status_code == 200
