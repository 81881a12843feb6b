"""The role matrix: no session / user / admin / super_admin against the core endpoints (the
dashboard index, the session, conversations, chat, onboarding, settings, health and the
interface description).

Each caller is tried with the bearer header and, for the session roles, with the session cookie;
the answer must depend on the role alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from tests.conftest import AppUser, UserFactory

ROLES = ("none", "user", "admin", "super_admin")
UNAUTHORIZED = (401, {"error": "Unauthorized"})
FORBIDDEN = (403, {"error": "Forbidden"})


@dataclass(frozen=True)
class Endpoint:
    method: str
    path: str
    json: Any = None
    session: tuple[int, Any] | int = 200  # what any signed-in role gets (unless overridden)
    anonymous: tuple[int, Any] | int = UNAUTHORIZED
    super_admin_only: bool = False
    headers: dict[str, str] | None = None


NOT_LOGGED_IN = (
    401,
    {
        "ocs": {
            "meta": {
                "status": "failure",
                "statuscode": 997,
                "message": "Current user is not logged in",
            },
            "data": [],
        }
    },
)

ENDPOINTS = [
    Endpoint(
        "GET",
        "/ocs/v2.php/apps/dashboard/api",
        headers={"OCS-APIRequest": "true"},
        anonymous=NOT_LOGGED_IN,
    ),
    Endpoint("GET", "/api/v1/auth/me"),
    Endpoint("POST", "/api/v1/auth/logout"),
    Endpoint("GET", "/api/v1/control-center/conversations"),
    Endpoint("GET", "/api/v1/control-center/conversations/nope", session=404),
    Endpoint("DELETE", "/api/v1/control-center/conversations/nope", session=404),
    # A blank message stops the chat at the check after the session's: it proves the session passed.
    Endpoint(
        "POST",
        "/api/v1/control-center/chat",
        json={"message": "  "},
        session=(400, {"error": "Missing or empty message"}),
    ),
    Endpoint("GET", "/api/v1/onboarding", session=(200, {"onboarding": None})),
    Endpoint("POST", "/api/v1/onboarding", json={"yearsInBusiness": "5"}),
    Endpoint("GET", "/api/v1/admin/settings", anonymous=FORBIDDEN, super_admin_only=True),
    Endpoint(
        "PUT",
        "/api/v1/admin/settings",
        json={"tagHighGCI": "high-gci"},
        anonymous=FORBIDDEN,
        super_admin_only=True,
    ),
    Endpoint(
        "DELETE",
        "/api/v1/admin/settings/tagDFYRequested",
        anonymous=FORBIDDEN,
        super_admin_only=True,
    ),
    Endpoint(
        "GET",
        "/api/v1/admin/mcp-servers",
        anonymous=FORBIDDEN,
        super_admin_only=True,
    ),
    Endpoint(
        "DELETE",
        "/api/v1/admin/mcp-servers/nope",
        session=404,
        anonymous=FORBIDDEN,
        super_admin_only=True,
    ),
    # No MCP server is set: the test answers at once, without a remote call.
    Endpoint(
        "POST",
        "/api/v1/admin/integrations/mcp/test",
        session=(
            200,
            {"ok": False, "detail": "mcpServerUrl is not set and no MCP server is configured"},
        ),
        anonymous=FORBIDDEN,
        super_admin_only=True,
    ),
    Endpoint("GET", "/healthz", anonymous=200),
    Endpoint("GET", "/readyz", anonymous=200),
    Endpoint("GET", "/openapi.json", anonymous=200),
]


def _expected(endpoint: Endpoint, role: str) -> tuple[int, Any] | int:
    if role == "none":
        return endpoint.anonymous
    if endpoint.super_admin_only and role != "super_admin":
        return FORBIDDEN
    return endpoint.session if endpoint.anonymous != 200 else 200


def _check(response: httpx.Response, expected: tuple[int, Any] | int) -> None:
    if isinstance(expected, int):
        assert response.status_code == expected, response.text
    else:
        assert (response.status_code, response.json()) == expected


@pytest.mark.parametrize("endpoint", ENDPOINTS, ids=lambda e: f"{e.method} {e.path}")
@pytest.mark.parametrize("role", ROLES)
async def test_role_matrix(
    client: httpx.AsyncClient, users: UserFactory, endpoint: Endpoint, role: str
) -> None:
    expected = _expected(endpoint, role)
    if role == "none":
        response = await client.request(
            endpoint.method, endpoint.path, json=endpoint.json, headers=endpoint.headers
        )
        _check(response, expected)
        return
    # Bearer and cookie each get a fresh user: logout revokes the session it is called with.
    for transport in ("bearer", "cookie"):
        user: AppUser = await users.create(role)
        headers = {**(endpoint.headers or {}), **(user.headers if transport == "bearer" else {})}
        cookies = {"session": user.token} if transport == "cookie" else {}
        async with httpx.AsyncClient(base_url=str(client.base_url), cookies=cookies) as http:
            response = await http.request(
                endpoint.method, endpoint.path, json=endpoint.json, headers=headers
            )
        _check(response, expected)
