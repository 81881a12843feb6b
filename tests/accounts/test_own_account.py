"""/api/v1/auth/tokens and /api/v1/auth/password: the caller's own account."""

from __future__ import annotations

import hashlib

import httpx
from sqlalchemy import select, update
from sqlalchemy.orm import Session

from controlcenter.accounts.users import _change_password
from controlcenter.auth.models import ApiTokenRecord, UserRecord
from controlcenter.auth.verified import CREDENTIALS
from controlcenter.db import Database
from controlcenter.db.changes import ChangeStamp
from tests.conftest import RunningServer, UserFactory
from tests.dbtools import reading, snapshot, writing

TOKENS = "/api/v1/auth/tokens"
PASSWORD = "/api/v1/auth/password"
UNAUTHORIZED = {"error": "Unauthorized"}


async def me_status(client: httpx.AsyncClient, secret: str) -> int:
    response = await client.get("/api/v1/auth/me", headers={"Authorization": f"Bearer {secret}"})
    return response.status_code


async def test_create_use_list_and_revoke_a_token(
    client: httpx.AsyncClient, server: RunningServer, users: UserFactory
) -> None:
    broker = await users.create("user")
    made = await client.post(TOKENS, json={"label": "laptop"}, headers=broker.headers)
    assert made.status_code == 201, made.text
    token, secret = made.json()["token"], made.json()["secret"]
    assert set(token) == {"id", "label", "createdAt", "lastUsedAt"}
    assert token["label"] == "laptop" and token["lastUsedAt"] is None
    assert secret.startswith("cct_")
    async with reading(server.db) as db:
        stored = await db.get(ApiTokenRecord, token["id"])
    assert stored is not None and stored.token_hash == hashlib.sha256(secret.encode()).hexdigest()

    assert await me_status(client, secret) == 200
    listed = (await client.get(TOKENS, headers=broker.headers)).json()["tokens"]
    assert [t["label"] for t in listed] == ["tests", "laptop"]  # oldest first
    used = next(t for t in listed if t["id"] == token["id"])
    assert used["lastUsedAt"] is not None and used["lastUsedAt"].endswith("Z")
    assert secret not in str(listed)

    revoked = await client.delete(f"{TOKENS}/{token['id']}", headers=broker.headers)
    assert (revoked.status_code, revoked.json()) == (200, {"success": True})
    assert await me_status(client, secret) == 401
    again = await client.delete(f"{TOKENS}/{token['id']}", headers=broker.headers)
    assert (again.status_code, again.json()) == (404, {"error": "Token not found"})


async def test_another_users_token_is_unknown(
    client: httpx.AsyncClient, server: RunningServer, users: UserFactory
) -> None:
    broker = await users.create("user")
    boss = await users.create("super_admin")
    async with reading(server.db) as db:
        theirs = await db.scalar(
            select(ApiTokenRecord.id).where(ApiTokenRecord.user_id == broker.id)
        )
    response = await client.delete(f"{TOKENS}/{theirs}", headers=boss.headers)
    assert (response.status_code, response.json()) == (404, {"error": "Token not found"})
    assert await me_status(client, broker.api_token) == 200
    listed = (await client.get(TOKENS, headers=boss.headers)).json()["tokens"]
    assert theirs not in {t["id"] for t in listed}


async def test_token_refusals(
    client: httpx.AsyncClient, server: RunningServer, users: UserFactory
) -> None:
    broker = await users.create("user")
    before = await snapshot(server.db)
    body: object
    for body in ({}, {"label": ""}, {"label": "x" * 201}, {"label": 5}, {"label": None}, []):
        response = await client.post(TOKENS, json=body, headers=broker.headers)
        assert response.status_code == 400, body
        assert response.json()["error"] == "Validation failed"
        assert response.json()["details"], body
    bad = await client.post(TOKENS, content=b"{", headers=broker.headers)
    assert (bad.status_code, bad.json()) == (400, {"error": "Invalid JSON body"})
    for method, path in (
        ("GET", TOKENS),
        ("POST", TOKENS),
        ("DELETE", f"{TOKENS}/x"),
        ("POST", PASSWORD),
    ):
        for headers in ({}, {"Authorization": "Bearer junk"}):
            response = await client.request(method, path, json={"label": "x"}, headers=headers)
            assert (response.status_code, response.json()) == (401, UNAUTHORIZED)
    assert await snapshot(server.db) == before


async def test_change_password_keeps_this_session_and_ends_the_others(
    client: httpx.AsyncClient, server: RunningServer, users: UserFactory
) -> None:
    broker = await users.create("user")
    login = await client.post(
        "/api/v1/auth/login", json={"email": broker.email, "password": broker.password}
    )
    other_session = login.json()["token"]
    before = await snapshot(server.db)

    for body, path in (
        ({"currentPassword": "wrong password!", "newPassword": "a new passphrase"},
         ["currentPassword"]),
        ({"currentPassword": broker.password, "newPassword": "too short"}, ["newPassword"]),
        ({"currentPassword": broker.password}, ["newPassword"]),
        ({"newPassword": "a new passphrase"}, ["currentPassword"]),
    ):  # fmt: skip
        response = await client.post(PASSWORD, json=body, headers=broker.headers)
        assert response.status_code == 400
        assert [d["path"] for d in response.json()["details"]] == [path], body
    assert await snapshot(server.db) == before

    changed = await client.post(
        PASSWORD,
        json={"currentPassword": broker.password, "newPassword": "a new passphrase"},
        headers=broker.headers,
    )
    assert (changed.status_code, changed.json()) == (200, {"success": True})
    assert await me_status(client, broker.token) == 200  # the session that changed it
    assert await me_status(client, other_session) == 401
    assert await me_status(client, broker.api_token) == 200  # tokens are separate credentials
    old = await client.post(
        "/api/v1/auth/login", json={"email": broker.email, "password": broker.password}
    )
    assert old.status_code == 401
    new = await client.post(
        "/api/v1/auth/login", json={"email": broker.email, "password": "a new passphrase"}
    )
    assert new.status_code == 200


def _stamp_of(session: Session, topic: str) -> str | None:
    return session.scalar(select(ChangeStamp.stamp).where(ChangeStamp.topic == topic))


async def test_revoking_a_token_that_is_not_there_keeps_every_credential(
    client: httpx.AsyncClient, db: Database, users: UserFactory
) -> None:
    """A 404 changes nothing: the processes keep the credentials they verified (a caller
    could otherwise make every process forget them, at will)."""
    broker = await users.create("user")
    before = await db.run_read(_stamp_of, CREDENTIALS)
    gone = await client.delete(f"{TOKENS}/no-such-token", headers=broker.headers)
    assert gone.status_code == 404
    assert await db.run_read(_stamp_of, CREDENTIALS) == before


async def test_a_password_change_overtaken_by_a_reset_changes_nothing(
    db: Database, users: UserFactory
) -> None:
    """The new password is set only while the password is still the one checked: a reset in
    between (which revoked every session) stands."""
    broker = await users.create("user")
    checked = await db.run_read(_hash_of, broker.id)
    assert checked is not None
    async with writing(db) as session:
        await session.execute(
            update(UserRecord).where(UserRecord.id == broker.id).values(password_hash="reset")
        )
    changed = await db.run_write(_change_password, broker.id, checked, "mine", None)
    assert changed is False
    assert await db.run_read(_hash_of, broker.id) == "reset"


def _hash_of(session: Session, user_id: str) -> str | None:
    return session.scalar(select(UserRecord.password_hash).where(UserRecord.id == user_id))
