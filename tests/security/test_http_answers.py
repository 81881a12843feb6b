"""405 with the full Allow list, redirects that never name the client's Host, and the logout
cookie's flags (the cookie that ends the session keeps the session cookie's HttpOnly, SameSite
and Secure)."""

from __future__ import annotations

import re
from collections.abc import Iterator

import httpx
import pytest

from controlcenter.app import create_app
from controlcenter.config import Config
from tests.conftest import RunningServer, UserFactory
from tests.fakes.server import LoopbackServer

METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE")


async def test_every_405_lists_every_method_the_path_serves(
    server: RunningServer, client: httpx.AsyncClient
) -> None:
    checked = 0
    paths = server.app.openapi()["paths"]
    # A concrete path may match several templates (`.../mcp-servers/status` is also
    # `.../mcp-servers/{server_id}`): a fixed segment is never taken as an id, so it serves
    # the methods of those with the most fixed segments.
    templates = [
        (re.compile(re.sub(r"\{[^}]+\}", "[^/]+", t) + "$"), t.count("/") - t.count("{"), ops)
        for t, ops in paths.items()
    ]
    for path in paths:
        concrete = path.replace("{app_id}", "dashboard").replace("{conversation_id}", "x")
        matching = [(fixed, ops) for pattern, fixed, ops in templates if pattern.match(concrete)]
        most = max(fixed for fixed, _ in matching)
        served = {name.upper() for fixed, ops in matching if fixed == most for name in ops}
        for method in METHODS:
            if method in served:
                continue
            response = await client.request(method, concrete)
            if method == "HEAD" and response.status_code != 405:
                continue  # the framework may answer HEAD as GET
            assert response.status_code == 405, (method, path)
            allow = {m.strip() for m in response.headers["allow"].split(",")}
            assert allow == served, (method, path)
            checked += 1
    assert checked > 20


async def test_a_conversation_path_allows_get_patch_and_delete(client: httpx.AsyncClient) -> None:
    response = await client.post("/api/v1/control-center/conversations/abc")
    assert response.status_code == 405
    assert response.headers["allow"] == "GET, PATCH, DELETE"
    assert response.json() == {"error": "Method not allowed"}


@pytest.mark.parametrize("host", ["evil.example", "evil.example:8443", "127.0.0.1"])
async def test_the_trailing_slash_redirect_never_names_the_clients_host(
    client: httpx.AsyncClient, host: str
) -> None:
    response = await client.get(
        "/api/v1/auth/me/?x=1", headers={"Host": host}, follow_redirects=False
    )
    assert response.status_code == 307
    assert response.headers["location"] == "/api/v1/auth/me?x=1"


async def test_a_relative_redirect_still_gets_there(
    client: httpx.AsyncClient, users: UserFactory
) -> None:
    user = await users.create()
    response = await client.get("/api/v1/auth/me/", headers=user.headers, follow_redirects=True)
    assert response.status_code == 200 and response.json()["user"]["id"] == user.id


def cookie_attributes(header: str) -> set[str]:
    return {part.strip().split("=")[0].lower() for part in header.split(";")[1:]}


async def test_logout_deletes_the_cookie_with_its_flags(
    client: httpx.AsyncClient, users: UserFactory
) -> None:
    user = await users.create()
    response = await client.post("/api/v1/auth/logout", headers=user.headers)
    assert response.status_code == 200
    cookie = response.headers["set-cookie"]
    assert cookie.startswith('session="";') or cookie.startswith("session=;")
    assert {"httponly", "samesite", "max-age", "path"} <= cookie_attributes(cookie)
    assert "samesite=lax" in cookie.lower()
    assert "secure" not in cookie_attributes(cookie)  # COOKIE_SECURE is false here


@pytest.fixture
def secure_server(config: Config, server: RunningServer) -> Iterator[str]:
    with LoopbackServer(create_app(config.model_copy(update={"cookie_secure": True}))) as served:
        yield served.url


async def test_with_cookie_secure_both_cookies_are_secure(
    secure_server: str, users: UserFactory
) -> None:
    user = await users.create()
    async with httpx.AsyncClient(base_url=secure_server, timeout=30) as http:
        login = await http.post(
            "/api/v1/auth/login", json={"email": user.email, "password": user.password}
        )
        logout = await http.post("/api/v1/auth/logout", headers=user.headers)
    for response in (login, logout):
        assert response.status_code == 200
        assert {"secure", "httponly", "samesite"} <= cookie_attributes(
            response.headers["set-cookie"]
        )
