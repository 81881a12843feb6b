from __future__ import annotations

import httpx

from tests.conftest import AppUser, UserFactory


async def test_login_sets_cookie_and_returns_user(
    client: httpx.AsyncClient, users: UserFactory
) -> None:
    user = await users.create("admin")
    response = await client.post(
        "/api/v1/auth/login", json={"email": user.email.upper(), "password": user.password}
    )
    assert response.status_code == 200
    body = response.json()
    assert set(body) == {"token", "user"}
    assert body["user"] == {
        "id": user.id,
        "email": user.email,
        "name": user.name,
        "role": "admin",
        "brokerage": None,
    }
    cookie = response.headers["set-cookie"]
    assert cookie.startswith(f"session={body['token']}")
    assert "HttpOnly" in cookie and "SameSite=lax" in cookie and "Secure" not in cookie
    me = await client.get("/api/v1/auth/me")  # the client keeps the cookie
    assert me.status_code == 200
    assert me.json() == {"user": body["user"]}


async def test_wrong_password_and_unknown_email(
    client: httpx.AsyncClient, users: UserFactory
) -> None:
    user = await users.create()
    for payload in (
        {"email": user.email, "password": "wrong"},
        {"email": "nobody@example.com", "password": user.password},
    ):
        response = await client.post("/api/v1/auth/login", json=payload)
        assert response.status_code == 401
        assert response.json() == {"error": "Invalid credentials"}


async def test_login_bad_bodies(client: httpx.AsyncClient) -> None:
    response = await client.post("/api/v1/auth/login", content=b"{nope")
    assert (response.status_code, response.json()) == (400, {"error": "Invalid JSON body"})
    body: object
    for body in ([], {"email": 1, "password": "x"}, {"email": "a@b.c"}):
        response = await client.post("/api/v1/auth/login", json=body)
        assert (response.status_code, response.json()) == (400, {"error": "Validation failed"})


async def test_logout_revokes_the_session(client: httpx.AsyncClient, users: UserFactory) -> None:
    user: AppUser = await users.create()
    assert (await client.get("/api/v1/auth/me", headers=user.headers)).status_code == 200
    response = await client.post("/api/v1/auth/logout", headers=user.headers)
    assert response.json() == {"success": True}
    again = await client.get("/api/v1/auth/me", headers=user.headers)
    assert (again.status_code, again.json()) == (401, {"error": "Unauthorized"})


async def test_api_token_works_as_bearer(client: httpx.AsyncClient, users: UserFactory) -> None:
    user = await users.create()
    response = await client.get(
        "/api/v1/auth/me", headers={"Authorization": f"Bearer {user.api_token}"}
    )
    assert response.status_code == 200
    assert response.json()["user"]["id"] == user.id
