"""/api/v1/admin/users: who may do what, every refusal, and what each change does."""

from __future__ import annotations

import base64
from typing import Any

import httpx
import pytest
from sqlalchemy import func, select

from controlcenter.auth.models import ApiTokenRecord, Session, UserRecord
from controlcenter.chat.models import ConversationRow, Message
from controlcenter.onboarding.models import Onboarding
from controlcenter.outbox.models import OutboxJob
from tests.conftest import AppUser, RunningServer, UserFactory
from tests.dbtools import reading, snapshot, writing

URL = "/api/v1/admin/users"
FORBIDDEN = {"error": "Forbidden"}
NOT_FOUND = {"error": "User not found"}
LAST = {"error": "The last active super administrator cannot be demoted, disabled or deleted"}


def basic(email: str, secret: str) -> dict[str, str]:
    value = base64.b64encode(f"{email}:{secret}".encode()).decode()
    return {"Authorization": f"Basic {value}"}


async def can_sign_in(client: httpx.AsyncClient, email: str, password: str) -> bool:
    response = await client.post("/api/v1/auth/login", json={"email": email, "password": password})
    return response.status_code == 200


async def is_accepted(client: httpx.AsyncClient, headers: dict[str, str]) -> bool:
    """Whether the credential is accepted: HTTP basic by the dashboard index (the only place
    that takes it), any other by /me."""
    if headers["Authorization"].startswith("Basic"):
        response = await client.get(
            "/ocs/v2.php/apps/dashboard/api", headers={**headers, "OCS-APIRequest": "true"}
        )
    else:
        response = await client.get("/api/v1/auth/me", headers=headers)
    assert response.status_code in (200, 401), response.text
    return response.status_code == 200


def details_paths(response: httpx.Response) -> list[list[Any]]:
    body = response.json()
    assert body["error"] == "Validation failed", body
    assert all(set(item) == {"path", "message", "type"} for item in body["details"])
    return [item["path"] for item in body["details"]]


# -- create --------------------------------------------------------------------------------------


async def test_super_admin_creates_each_role_with_a_generated_or_chosen_password(
    client: httpx.AsyncClient, users: UserFactory
) -> None:
    boss = await users.create("super_admin")
    made = await client.post(
        URL, json={"email": "New@Example.com", "name": "Nia", "role": "admin"}, headers=boss.headers
    )
    assert made.status_code == 201, made.text
    body = made.json()
    assert set(body) == {"user", "password"}
    user = body["user"]
    assert set(user) == {
        "id", "email", "name", "role", "brokerage", "createdAt", "disabled", "crmLocationId"
    }  # fmt: skip
    assert (user["email"], user["name"], user["role"], user["disabled"]) == (
        "new@example.com", "Nia", "admin", False
    )  # fmt: skip
    assert user["crmLocationId"] is None and user["createdAt"].endswith("Z")
    assert len(body["password"]) >= 12
    assert await can_sign_in(client, "new@example.com", body["password"])

    chosen = await client.post(
        URL,
        json={"email": "root2@example.com", "role": "super_admin", "password": "a long passphrase"},
        headers=boss.headers,
    )
    assert chosen.status_code == 201
    assert "password" not in chosen.json()
    assert chosen.json()["user"]["role"] == "super_admin"
    assert await can_sign_in(client, "root2@example.com", "a long passphrase")

    plain = await client.post(URL, json={"email": "plain@example.com"}, headers=boss.headers)
    assert plain.status_code == 201 and plain.json()["user"]["role"] == "user"


async def test_create_refusals(
    client: httpx.AsyncClient, server: RunningServer, users: UserFactory
) -> None:
    boss = await users.create("super_admin")
    await client.post(URL, json={"email": "taken@example.com"}, headers=boss.headers)
    before = await snapshot(server.db)

    duplicate = await client.post(URL, json={"email": "TAKEN@example.com"}, headers=boss.headers)
    assert (duplicate.status_code, duplicate.json()) == (
        409, {"error": "A user with this e-mail already exists"}
    )  # fmt: skip

    for content in (b"{nope", b"", b"\xff"):
        response = await client.post(URL, content=content, headers=boss.headers)
        assert (response.status_code, response.json()) == (400, {"error": "Invalid JSON body"})

    for body, path in (
        ([], []),
        ("x", []),
        ({}, ["email"]),
        ({"email": "not-an-address"}, ["email"]),
        ({"email": 5}, ["email"]),
        ({"email": "a@example.com", "password": "short-pw"}, ["password"]),
        ({"email": "a@example.com", "password": None}, ["password"]),
        ({"email": "a@example.com", "role": "owner"}, ["role"]),
        ({"email": "a@example.com", "name": "x" * 201}, ["name"]),
        ({"email": "a@example.com", "nmae": "typo"}, ["nmae"]),
        ({"email": "a@example.com", "name": "nul\u0000"}, ["name"]),
    ):
        response = await client.post(URL, json=body, headers=boss.headers)
        assert response.status_code == 400, (body, response.text)
        assert details_paths(response) == [path], body

    short = await client.post(
        URL, json={"email": "a@example.com", "password": "elevenchars"}, headers=boss.headers
    )
    assert short.json()["details"][0]["message"] == "String should have at least 12 characters"
    assert await snapshot(server.db) == before


async def test_who_may_create_whom(
    client: httpx.AsyncClient, server: RunningServer, users: UserFactory
) -> None:
    admin = await users.create("admin")
    broker = await users.create("user")
    made = await client.post(URL, json={"email": "b@example.com"}, headers=admin.headers)
    assert made.status_code == 201
    before = await snapshot(server.db)
    for role in ("admin", "super_admin"):
        response = await client.post(
            URL, json={"email": f"{role}@example.com", "role": role}, headers=admin.headers
        )
        assert (response.status_code, response.json()) == (403, FORBIDDEN)
    for headers in (broker.headers, {}, {"Authorization": "Bearer junk"}):
        for method, path in (
            ("GET", URL),
            ("POST", URL),
            ("PATCH", f"{URL}/{broker.id}"),
            ("POST", f"{URL}/{broker.id}/password"),
            ("DELETE", f"{URL}/{broker.id}"),
        ):
            response = await client.request(method, path, json={}, headers=headers)
            assert (response.status_code, response.json()) == (403, FORBIDDEN), (method, path)
    assert await snapshot(server.db) == before


# -- list ----------------------------------------------------------------------------------------


async def test_list_pages_by_email(client: httpx.AsyncClient, users: UserFactory) -> None:
    admin = await users.create("admin", email="a-admin@example.com")
    for name in ("b", "c", "d", "e"):
        await users.create("user", email=f"{name}@example.com")
    seen: list[str] = []
    cursor = None
    while True:
        params: dict[str, Any] = {"limit": 2}
        if cursor:
            params["cursor"] = cursor
        page = await client.get(URL, params=params, headers=admin.headers)
        assert page.status_code == 200
        body = page.json()
        assert len(body["users"]) <= 2
        seen += [user["email"] for user in body["users"]]
        cursor = body["nextCursor"]
        if cursor is None:
            break
    assert seen == [
        "a-admin@example.com", "b@example.com", "c@example.com", "d@example.com", "e@example.com"
    ]  # fmt: skip
    everyone = (await client.get(URL, headers=admin.headers)).json()
    assert everyone["nextCursor"] is None and len(everyone["users"]) == 5
    assert all("password" not in str(user) for user in everyone["users"])

    for params in ({"limit": 0}, {"limit": 201}, {"limit": "x"}, {"cursor": "%%%"}):
        response = await client.get(URL, params=params, headers=admin.headers)
        assert response.status_code == 400, params
        assert response.json()["error"] == "Validation failed"


# -- patch ---------------------------------------------------------------------------------------


async def test_super_admin_promotes_renames_links_and_demotes(
    client: httpx.AsyncClient, users: UserFactory
) -> None:
    boss = await users.create("super_admin")
    broker = await users.create("user")
    url = f"{URL}/{broker.id}"
    promoted = await client.patch(
        url, json={"role": "admin", "name": "Bea", "crmLocationId": "Loc_1-x"}, headers=boss.headers
    )
    assert promoted.status_code == 200, promoted.text
    user = promoted.json()["user"]
    assert (user["role"], user["name"], user["crmLocationId"]) == ("admin", "Bea", "Loc_1-x")
    me = await client.get("/api/v1/auth/me", headers=broker.headers)
    assert me.json()["user"]["role"] == "admin"  # at once, from the database

    unlinked = await client.patch(url, json={"crmLocationId": None}, headers=boss.headers)
    assert unlinked.json()["user"]["crmLocationId"] is None
    assert unlinked.json()["user"]["name"] == "Bea"  # absent fields unchanged
    demoted = await client.patch(url, json={"role": "user"}, headers=boss.headers)
    assert demoted.json()["user"]["role"] == "user"


async def test_admin_acts_on_users_only(
    client: httpx.AsyncClient, server: RunningServer, users: UserFactory
) -> None:
    admin = await users.create("admin")
    other_admin = await users.create("admin")
    boss = await users.create("super_admin")
    broker = await users.create("user")
    renamed = await client.patch(
        f"{URL}/{broker.id}", json={"name": "Renamed"}, headers=admin.headers
    )
    assert renamed.status_code == 200
    before = await snapshot(server.db)
    for target, body in (
        (broker, {"role": "admin"}),
        (broker, {"role": "super_admin"}),
        (other_admin, {"name": "x"}),
        (other_admin, {"role": "user"}),
        (other_admin, {"disabled": True}),
        (boss, {"disabled": True}),
        (admin, {"role": "super_admin"}),
    ):
        response = await client.patch(f"{URL}/{target.id}", json=body, headers=admin.headers)
        assert (response.status_code, response.json()) == (403, FORBIDDEN), body
    for method, path in (
        ("POST", f"{URL}/{other_admin.id}/password"),
        ("DELETE", f"{URL}/{boss.id}"),
    ):
        response = await client.request(method, path, json={}, headers=admin.headers)
        assert (response.status_code, response.json()) == (403, FORBIDDEN)
    assert await snapshot(server.db) == before


async def test_patch_refusals(
    client: httpx.AsyncClient, server: RunningServer, users: UserFactory
) -> None:
    boss = await users.create("super_admin")
    broker = await users.create("user")
    url = f"{URL}/{broker.id}"
    before = await snapshot(server.db)
    for body, path in (
        ({"name": None}, ["name"]),
        ({"role": None}, ["role"]),
        ({"disabled": None}, ["disabled"]),
        ({"disabled": "true"}, ["disabled"]),
        ({"role": "root"}, ["role"]),
        ({"crmLocationId": "has space"}, ["crmLocationId"]),
        ({"crmLocationId": ""}, ["crmLocationId"]),
        ({"crmLocationId": "x" * 65}, ["crmLocationId"]),
        ({"email": "new@example.com"}, ["email"]),
    ):
        response = await client.patch(url, json=body, headers=boss.headers)
        assert response.status_code == 400, body
        assert details_paths(response) == [path], body
    bad_json = await client.patch(url, content=b"{", headers=boss.headers)
    assert (bad_json.status_code, bad_json.json()) == (400, {"error": "Invalid JSON body"})
    for method, missing in (
        ("PATCH", f"{URL}/nope"),
        ("POST", f"{URL}/nope/password"),
        ("DELETE", f"{URL}/nope"),
    ):
        response = await client.request(method, missing, json={}, headers=boss.headers)
        assert (response.status_code, response.json()) == (404, NOT_FOUND), (method, missing)
    assert await snapshot(server.db) == before


async def test_disabling_ends_every_session_and_token_at_once(
    client: httpx.AsyncClient, server: RunningServer, users: UserFactory
) -> None:
    boss = await users.create("super_admin")
    broker = await users.create("user")
    credentials = (
        broker.headers,
        {"Authorization": f"Bearer {broker.api_token}"},
        basic(broker.email, broker.api_token),
        basic(broker.email, broker.password),
    )
    for headers in credentials:
        assert await is_accepted(client, headers)

    disabled = await client.patch(
        f"{URL}/{broker.id}", json={"disabled": True}, headers=boss.headers
    )
    assert disabled.json()["user"]["disabled"] is True
    for headers in credentials:
        assert not await is_accepted(client, headers)
    assert not await can_sign_in(client, broker.email, broker.password)
    async with reading(server.db) as db:
        assert await db.scalar(select(func.count()).select_from(ApiTokenRecord)) == 1  # boss's only
        sessions = (await db.scalars(select(Session).where(Session.user_id == broker.id))).all()
        assert sessions and all(s.revoked_at is not None for s in sessions)

    enabled = await client.patch(
        f"{URL}/{broker.id}", json={"disabled": False}, headers=boss.headers
    )
    assert enabled.json()["user"]["disabled"] is False
    assert await can_sign_in(client, broker.email, broker.password)
    assert not await is_accepted(client, broker.headers)  # old sessions stay revoked
    assert not await is_accepted(client, {"Authorization": f"Bearer {broker.api_token}"})


async def test_the_last_active_super_admin_is_protected(
    client: httpx.AsyncClient, server: RunningServer, users: UserFactory
) -> None:
    boss = await users.create("super_admin")
    url = f"{URL}/{boss.id}"
    before = await snapshot(server.db)
    for method, body in (
        ("PATCH", {"role": "admin"}),
        ("PATCH", {"role": "user"}),
        ("PATCH", {"disabled": True}),
        ("DELETE", None),
    ):
        response = await client.request(method, url, json=body, headers=boss.headers)
        assert (response.status_code, response.json()) == (409, LAST), body
    assert await snapshot(server.db) == before
    # Changes that keep them a super administrator are fine.
    same = await client.patch(url, json={"role": "super_admin", "name": "B"}, headers=boss.headers)
    assert same.status_code == 200

    second = await users.create("super_admin")
    demoted = await client.patch(url, json={"role": "admin"}, headers=second.headers)
    assert demoted.status_code == 200
    # A disabled super administrator does not count as the other one.
    await client.patch(url, json={"role": "super_admin"}, headers=second.headers)
    await client.patch(url, json={"disabled": True}, headers=second.headers)
    last = await client.delete(f"{URL}/{second.id}", headers=second.headers)
    assert (last.status_code, last.json()) == (409, LAST)


# -- password ------------------------------------------------------------------------------------


async def test_reset_password_generated_or_chosen_revokes_sessions(
    client: httpx.AsyncClient, users: UserFactory
) -> None:
    admin = await users.create("admin")
    broker = await users.create("user")
    url = f"{URL}/{broker.id}/password"
    generated = await client.post(url, headers=admin.headers)
    assert generated.status_code == 200
    new_password = generated.json()["password"]
    assert generated.json()["success"] is True
    assert not await is_accepted(client, broker.headers)
    assert await is_accepted(client, {"Authorization": f"Bearer {broker.api_token}"})
    assert not await can_sign_in(client, broker.email, broker.password)
    assert await can_sign_in(client, broker.email, new_password)

    chosen = await client.post(url, json={"password": "another passphrase"}, headers=admin.headers)
    assert chosen.json() == {"success": True}
    assert await can_sign_in(client, broker.email, "another passphrase")

    body: object
    for body in ({"password": "short"}, {"password": None}, {"pass": "x" * 20}, []):
        response = await client.post(url, json=body, headers=admin.headers)
        assert response.status_code == 400, body
    assert await can_sign_in(client, broker.email, "another passphrase")


# -- delete --------------------------------------------------------------------------------------


async def test_delete_removes_everything_and_cancels_pending_jobs(
    client: httpx.AsyncClient, server: RunningServer, users: UserFactory
) -> None:
    admin = await users.create("admin")
    broker = await users.create("user")
    other = await users.create("user")
    for user in (broker, other):
        saved = await client.post(
            "/api/v1/onboarding", json={"gciLast12Months": "250k"}, headers=user.headers
        )
        assert saved.status_code == 200
    async with writing(server.db) as db:
        conversation = ConversationRow(user_id=broker.id, title="t")
        db.add(conversation)
        await db.flush()
        db.add(Message(id="m1", conversation_id=conversation.id, role="user", content="hi"))

    deleted = await client.delete(f"{URL}/{broker.id}", headers=admin.headers)
    assert (deleted.status_code, deleted.json()) == (200, {"success": True})

    async with reading(server.db) as db:
        for model, column in (
            (UserRecord, UserRecord.id),
            (Session, Session.user_id),
            (ApiTokenRecord, ApiTokenRecord.user_id),
            (ConversationRow, ConversationRow.user_id),
            (Onboarding, Onboarding.userId),
        ):
            count = await db.scalar(
                select(func.count()).select_from(model).where(column == broker.id)
            )
            assert count == 0, model
        assert await db.scalar(select(func.count()).select_from(Message)) == 0
        jobs = (await db.scalars(select(OutboxJob))).all()
    mine = [job for job in jobs if job.payload["userId"] == broker.id]
    theirs = [job for job in jobs if job.payload["userId"] == other.id]
    assert len(mine) == 3 and {job.status for job in mine} == {"cancelled"}
    assert {job.last_error for job in mine} == {"user deleted"}
    assert len(theirs) == 3 and {job.status for job in theirs} == {"pending"}
    assert not await is_accepted(client, broker.headers)
    again = await client.delete(f"{URL}/{broker.id}", headers=admin.headers)
    assert (again.status_code, again.json()) == (404, NOT_FOUND)


@pytest.mark.parametrize("role", ["admin", "super_admin"])
async def test_super_admin_deletes_admins(
    client: httpx.AsyncClient, users: UserFactory, role: str
) -> None:
    boss = await users.create("super_admin")
    target: AppUser = await users.create(role)
    response = await client.delete(f"{URL}/{target.id}", headers=boss.headers)
    assert response.status_code == 200
