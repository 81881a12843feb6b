"""Who may use /api/v1/onboarding: any signed-in user, by cookie, bearer JWT or API token."""

from __future__ import annotations

import httpx
import pytest

from tests.conftest import RunningServer, UserFactory
from tests.dbtools import cookie, snapshot

URL = "/api/v1/onboarding"
UNAUTHORIZED = {"error": "Unauthorized"}


@pytest.mark.parametrize("role", ["user", "admin", "super_admin"])
async def test_every_role_with_every_credential_reads_and_saves(
    client: httpx.AsyncClient, users: UserFactory, role: str
) -> None:
    user = await users.create(role)
    credentials = {
        "bearer": {"Authorization": f"Bearer {user.token}"},
        "cookie": cookie(user.token),
        "api token": {"Authorization": f"Bearer {user.api_token}"},
    }
    for how, headers in credentials.items():
        saved = await client.post(URL, json={"yearsInBusiness": how}, headers=headers)
        assert saved.status_code == 200, how
        assert saved.json()["onboarding"]["userId"] == user.id
        read = await client.get(URL, headers=headers)
        assert read.status_code == 200, how
        assert read.json()["onboarding"]["yearsInBusiness"] == how


async def test_no_session_is_401_before_the_body_is_looked_at(
    client: httpx.AsyncClient, server: RunningServer, users: UserFactory
) -> None:
    user = await users.create()
    before = await snapshot(server.db)
    bad_credentials: list[dict[str, str]] = [
        {},
        {"Authorization": "Bearer not-a-token"},
        {"Authorization": f"Bearer {user.token[:-2]}xx"},  # tampered signature
        cookie("garbage"),
    ]
    bodies: list[bytes] = [b'{"yearsInBusiness": "5"}', b"{not json", b'{"usingOtherCrm": "yes"}']
    for headers in bad_credentials:
        response = await client.get(URL, headers=headers)
        assert (response.status_code, response.json()) == (401, UNAUTHORIZED)
        for body in bodies:
            response = await client.post(URL, content=body, headers=headers)
            assert (response.status_code, response.json()) == (401, UNAUTHORIZED)
            assert response.headers["content-type"] == "application/json"
    assert await snapshot(server.db) == before


async def test_a_user_sees_only_their_own_record(
    client: httpx.AsyncClient, users: UserFactory
) -> None:
    alice, bob = await users.create(), await users.create()
    await client.post(URL, json={"currentCrmName": "alice's"}, headers=alice.headers)
    response = await client.get(URL, headers=bob.headers)
    assert response.json() == {"onboarding": None}
    await client.post(URL, json={"leadSourceName": "bob's"}, headers=bob.headers)
    mine = (await client.get(URL, headers=alice.headers)).json()["onboarding"]
    assert (mine["userId"], mine["currentCrmName"], mine["leadSourceName"]) == (
        alice.id,
        "alice's",
        None,
    )


async def test_the_interface_description_shows_both_request_bodies(
    client: httpx.AsyncClient,
) -> None:
    document = (await client.get("/openapi.json")).json()
    paths = document["paths"]
    for path, method, field in (
        ("/api/v1/onboarding", "post", "brokerageName"),
        ("/api/v1/admin/settings", "put", "notificationEmail"),
    ):
        schema = paths[path][method]["requestBody"]["content"]["application/json"]["schema"]
        # A named schema, for generated clients: inline under its title (FastAPI's way for a
        # body the route reads by hand), or a component.
        if "$ref" in schema:
            schema = document["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]]
        assert schema["title"]
        assert field in schema["properties"]
    assert set(paths["/api/v1/onboarding"]) == {"get", "post"}
    assert set(paths["/api/v1/admin/settings"]) == {"get", "put"}
