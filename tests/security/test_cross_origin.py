"""Cross-origin protection (docs/security.md): a matrix of every state-changing endpoint
× credential kind × the headers a browser sends, against the running server."""

from __future__ import annotations

import base64
import re
from collections.abc import Iterator

import httpx
import pytest

from controlcenter.app import create_app
from controlcenter.config import Config, parse_origins
from tests.conftest import AppUser, RunningServer, UserFactory
from tests.fakes.server import LoopbackServer

REFUSED = {"error": "Cross-origin request refused"}
UNSAFE = ("POST", "PUT", "PATCH", "DELETE")
FRONT_END = "https://app.example.com"

# What a page on another site (or a sibling subdomain) makes a browser send: each of these
# alone must be refused for a request without an Authorization header.
FOREIGN = {
    "cross-site fetch": {"Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"},
    "cross-site form, text/plain": {
        "Sec-Fetch-Site": "cross-site",
        "Origin": "https://evil.example",
        "Content-Type": "text/plain",
    },
    "sibling subdomain": {"Sec-Fetch-Site": "same-site", "Origin": "https://evil.127.0.0.1"},
    "Sec-Fetch-Site alone": {"Sec-Fetch-Site": "cross-site"},
    "Origin alone (older browser)": {"Origin": "https://evil.example"},
    "Origin null (sandboxed page)": {"Origin": "null"},
    "same-origin label, foreign Origin": {
        "Sec-Fetch-Site": "same-origin",
        "Origin": "http://evil.example",
    },
}


def own_origin(server: RunningServer) -> str:
    return server.url  # http://127.0.0.1:<port>: the Host the client sends


def same_origin_headers(server: RunningServer) -> dict[str, dict[str, str]]:
    return {
        "no browser headers": {},
        "same-origin": {"Sec-Fetch-Site": "same-origin", "Origin": own_origin(server)},
        "typed into the address bar": {"Sec-Fetch-Site": "none"},
        "own Origin only": {"Origin": own_origin(server)},
    }


def unsafe_routes(server: RunningServer) -> Iterator[tuple[str, str]]:
    """Every (method, path) of the app that changes state (as its interface description lists
    them, so that endpoints added later are covered), path parameters filled in."""
    for path, operations in server.app.openapi()["paths"].items():
        for method in sorted({name.upper() for name in operations} & set(UNSAFE)):
            yield method, re.sub(r"\{[^}]+\}", "x", path)


def credentials(kind: str, user: AppUser) -> dict[str, str]:
    if kind == "cookie":
        return {"Cookie": f"session={user.token}"}
    if kind == "bearer":
        return {"Authorization": f"Bearer {user.token}"}
    if kind == "basic":
        secret = base64.b64encode(f"{user.email}:{user.api_token}".encode()).decode()
        return {"Authorization": f"Basic {secret}"}
    return {}


async def test_every_state_changing_endpoint_refuses_foreign_cookie_requests(
    server: RunningServer, client: httpx.AsyncClient, users: UserFactory
) -> None:
    routes = list(unsafe_routes(server))
    assert ("PUT", "/api/v1/admin/settings") in routes and len(routes) >= 6
    accepted: list[str] = []
    for method, path in routes:
        for kind in ("cookie", "none"):
            for label, headers in FOREIGN.items():
                # A fresh super administrator each time: logout would end a shared session.
                user = await users.create("super_admin")
                response = await client.request(
                    method, path, headers={**credentials(kind, user), **headers}, content=b"{}"
                )
                if response.status_code != 403 or response.json() != REFUSED:
                    accepted.append(f"{method} {path} {kind} {label}: {response.status_code}")
    assert accepted == []


async def test_authorization_and_same_origin_requests_are_not_affected(
    server: RunningServer, client: httpx.AsyncClient, users: UserFactory
) -> None:
    refused: list[str] = []
    cases = [
        *(("cookie", label, h) for label, h in same_origin_headers(server).items()),
        *(("none", label, h) for label, h in same_origin_headers(server).items()),
        *(("bearer", label, h) for label, h in FOREIGN.items()),
        *(("basic", label, h) for label, h in FOREIGN.items()),
    ]
    for method, path in unsafe_routes(server):
        for kind, label, headers in cases:
            user = await users.create("super_admin")
            response = await client.request(
                method, path, headers={**credentials(kind, user), **headers}, content=b"{}"
            )
            if response.status_code == 403 and response.json() == REFUSED:
                refused.append(f"{method} {path} {kind} {label}")
    assert refused == []


async def test_a_refused_settings_change_changes_nothing(
    client: httpx.AsyncClient, users: UserFactory
) -> None:
    admin = await users.create("super_admin")
    cookie = credentials("cookie", admin)
    forged = await client.put(
        "/api/v1/admin/settings",
        headers={**cookie, **FOREIGN["cross-site form, text/plain"]},
        content=b'{"tagHighGCI": "forged"}',
    )
    assert (forged.status_code, forged.json()) == (403, REFUSED)
    settings = (await client.get("/api/v1/admin/settings", headers=cookie)).json()
    assert settings["settings"]["tagHighGCI"] == ""

    # The same change from the service's own page goes through.
    own = await client.put(
        "/api/v1/admin/settings",
        headers={**cookie, "Sec-Fetch-Site": "same-origin", "Origin": str(client.base_url)},
        json={"tagHighGCI": "own"},
    )
    assert own.status_code == 200
    settings = (await client.get("/api/v1/admin/settings", headers=cookie)).json()
    assert settings["settings"]["tagHighGCI"] == "own"


async def test_a_foreign_sign_in_is_refused_before_the_password_is_checked(
    client: httpx.AsyncClient, users: UserFactory
) -> None:
    user = await users.create()
    login = {"email": user.email, "password": user.password}
    forged = await client.post(
        "/api/v1/auth/login", json=login, headers=FOREIGN["cross-site fetch"]
    )
    assert (forged.status_code, forged.json()) == (403, REFUSED)
    assert "set-cookie" not in forged.headers
    assert (await client.post("/api/v1/auth/login", json=login)).status_code == 200


async def test_safe_methods_are_never_refused(
    client: httpx.AsyncClient, users: UserFactory
) -> None:
    user = await users.create()
    response = await client.get(
        "/api/v1/auth/me", headers={**credentials("cookie", user), **FOREIGN["cross-site fetch"]}
    )
    assert response.status_code == 200


@pytest.fixture
def front_end_server(config: Config, server: RunningServer) -> Iterator[str]:
    app = create_app(config.model_copy(update={"allowed_origins": f"{FRONT_END}/, http://x.test"}))
    with LoopbackServer(app) as served:
        yield served.url


async def test_allowed_origins_are_let_through(front_end_server: str, users: UserFactory) -> None:
    user = await users.create()
    async with httpx.AsyncClient(base_url=front_end_server, timeout=30) as http:
        for headers, status in (
            ({"Sec-Fetch-Site": "cross-site", "Origin": FRONT_END}, 200),
            ({"Sec-Fetch-Site": "same-site", "Origin": "HTTPS://APP.example.com"}, 200),
            ({"Origin": "http://x.test"}, 200),
            ({"Sec-Fetch-Site": "cross-site", "Origin": "https://other.example.com"}, 403),
            ({"Sec-Fetch-Site": "cross-site", "Origin": f"{FRONT_END}:8443"}, 403),
        ):
            response = await http.post(
                "/api/v1/onboarding",
                headers={**credentials("cookie", user), **headers},
                json={"yearsInBusiness": "5"},
            )
            assert response.status_code == status, headers


@pytest.mark.parametrize(
    "value",
    [
        "app.example.com",
        "ftp://app.example.com",
        "https://app.example.com/path",
        "https://user@app.example.com",
        "https://",
    ],
)
def test_a_malformed_allowed_origin_stops_the_start(value: str) -> None:
    with pytest.raises(ValueError, match="ALLOWED_ORIGINS"):
        parse_origins(value)
    with pytest.raises(ValueError, match="ALLOWED_ORIGINS"):
        Config(allowed_origins=value)
