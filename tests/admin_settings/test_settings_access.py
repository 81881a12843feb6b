"""Only a super administrator may read or change settings (403 `Forbidden` for
anyone else, no session included)."""

from __future__ import annotations

import httpx
import pytest

from controlcenter.accounts.users import OPERATOR, UserChanges, update_user
from tests.conftest import AppUser, RunningServer, UserFactory
from tests.dbtools import cookie, snapshot

URL = "/api/v1/admin/settings"
FORBIDDEN = {"error": "Forbidden"}


def credentials(user: AppUser) -> dict[str, dict[str, str]]:
    return {
        "bearer": {"Authorization": f"Bearer {user.token}"},
        "cookie": cookie(user.token),
        "api token": {"Authorization": f"Bearer {user.api_token}"},
    }


@pytest.mark.parametrize("role", ["user", "admin"])
async def test_user_and_admin_are_forbidden(
    client: httpx.AsyncClient, server: RunningServer, users: UserFactory, role: str
) -> None:
    user = await users.create(role)
    before = await snapshot(server.db)
    for how, headers in credentials(user).items():
        response = await client.get(URL, headers=headers)
        assert (response.status_code, response.json()) == (403, FORBIDDEN), how
        for body in (b'{"tagHighGCI": "VIP"}', b"{nope", b'{"tagHighGCI": 1}'):
            response = await client.put(URL, content=body, headers=headers)
            assert (response.status_code, response.json()) == (403, FORBIDDEN), how
    assert await snapshot(server.db) == before


async def test_no_session_is_forbidden_not_unauthorized(
    client: httpx.AsyncClient, server: RunningServer, users: UserFactory
) -> None:
    admin = await users.create("super_admin")
    before = await snapshot(server.db)
    for headers in (
        {},
        {"Authorization": "Bearer junk"},
        {"Authorization": f"Bearer {admin.token[:-2]}xx"},  # tampered signature
        cookie("junk"),
    ):
        response = await client.get(URL, headers=headers)
        assert (response.status_code, response.json()) == (403, FORBIDDEN)
        for body in (b'{"tagHighGCI": "VIP"}', b"{nope"):
            response = await client.put(URL, content=body, headers=headers)
            assert (response.status_code, response.json()) == (403, FORBIDDEN)
    assert await snapshot(server.db) == before


async def test_super_admin_with_every_credential(
    client: httpx.AsyncClient, server: RunningServer, users: UserFactory
) -> None:
    admin = await users.create("super_admin")
    for how, headers in credentials(admin).items():
        response = await client.put(URL, json={"tasksListId": how}, headers=headers)
        assert (response.status_code, response.json()) == (200, {"success": True}), how
        response = await client.get(URL, headers=headers)
        assert response.status_code == 200
        assert response.json()["settings"]["tasksListId"] == how


async def test_a_demoted_super_admin_is_forbidden_at_once(
    client: httpx.AsyncClient, server: RunningServer, users: UserFactory
) -> None:
    admin = await users.create("super_admin")
    await users.create("super_admin")  # not the last one
    assert (await client.get(URL, headers=admin.headers)).status_code == 200
    await update_user(server.db, admin.id, UserChanges(role="admin"), actor_role=OPERATOR)
    response = await client.get(URL, headers=admin.headers)
    assert (response.status_code, response.json()) == (403, FORBIDDEN)
