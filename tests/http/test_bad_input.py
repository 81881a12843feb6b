"""Bad input anywhere gets a specified JSON answer, never a stack trace, and changes nothing."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest
from cryptography.fernet import Fernet
from sqlalchemy import func, select

from controlcenter.app import create_app
from controlcenter.auth.models import Session
from controlcenter.config import Config
from tests.conftest import TEST_SECRET_KEY, RunningServer, UserFactory
from tests.dbtools import reading
from tests.fakes.server import LoopbackServer

LIMIT = 1024 * 1024
TOO_LARGE = (413, {"error": "Request body too large"})
LOGIN = "/api/v1/auth/login"
POST_PATHS = [LOGIN, "/api/v1/onboarding", "/api/v1/control-center/chat", "/no/such/route"]


def no_trace(response: httpx.Response) -> None:
    for marker in ("Traceback", 'File "', "Error:", "sqlalchemy", "controlcenter."):
        assert marker not in response.text, response.text


async def session_count(server: RunningServer) -> int:
    async with reading(server.db) as db:
        return int(await db.scalar(select(func.count()).select_from(Session)) or 0)


@pytest.mark.parametrize("path", POST_PATHS)
async def test_declared_body_over_1_mib_is_413(client: httpx.AsyncClient, path: str) -> None:
    response = await client.post(path, content=b"x" * (LIMIT + 1))
    assert (response.status_code, response.json()) == TOO_LARGE
    assert response.headers["content-type"] == "application/json"


async def test_put_over_1_mib_is_413(client: httpx.AsyncClient) -> None:
    response = await client.put("/api/v1/admin/settings", content=b"{" + b" " * LIMIT + b"}")
    assert (response.status_code, response.json()) == TOO_LARGE


@pytest.mark.parametrize("path", POST_PATHS)
async def test_chunked_body_over_1_mib_is_413(client: httpx.AsyncClient, path: str) -> None:
    async def chunks() -> AsyncIterator[bytes]:
        for _ in range(17):  # 17 x 64 KiB = 1 MiB + 64 KiB, with no Content-Length
            yield b"y" * 65536

    request = client.build_request("POST", path, content=chunks())
    assert "content-length" not in request.headers
    assert request.headers["transfer-encoding"] == "chunked"
    response = await client.send(request)
    assert (response.status_code, response.json()) == TOO_LARGE


async def test_exactly_1_mib_is_accepted(
    client: httpx.AsyncClient, users: UserFactory, server: RunningServer
) -> None:
    user = await users.create()
    padding = LIMIT - len(json.dumps({"email": user.email, "password": ""}).encode())
    body = json.dumps({"email": user.email, "password": "p" * padding}).encode()
    assert len(body) == LIMIT
    response = await client.post(LOGIN, content=body)
    assert (response.status_code, response.json()) == (401, {"error": "Invalid credentials"})
    over = await client.post(LOGIN, content=body + b" ")
    assert (over.status_code, over.json()) == TOO_LARGE
    assert await session_count(server) == 1  # only the factory's session


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"{",
        b"{nope}",
        b"\xff\xfe{}",
        b'{"email": "a@example.com", "password": "\xc3\x28"}',
        b"\xef\xbb\xbf{}",  # a UTF-8 byte order mark is not JSON
        b'{"email": NaN}',
        b"[" * 100_000 + b"]" * 100_000,
        b'{"email": "a"} trailing',
    ],
)
async def test_login_invalid_json_or_utf8(
    client: httpx.AsyncClient, server: RunningServer, body: bytes
) -> None:
    response = await client.post(LOGIN, content=body, headers={"content-type": "application/json"})
    assert (response.status_code, response.json()) == (400, {"error": "Invalid JSON body"})
    no_trace(response)
    assert await session_count(server) == 0


@pytest.mark.parametrize(
    "body",
    [
        "null",
        '"a@example.com"',
        "42",
        "[]",
        '{"email": ["a@example.com"], "password": "x"}',
        '{"email": "a@example.com", "password": 1}',
        '{"email": "a@example.com", "password": null}',
        '{"password": "x"}',
    ],
)
async def test_login_wrong_shape(client: httpx.AsyncClient, body: str) -> None:
    response = await client.post(LOGIN, content=body)
    assert (response.status_code, response.json()) == (400, {"error": "Validation failed"})


async def test_login_reads_json_whatever_the_content_type(
    client: httpx.AsyncClient, users: UserFactory
) -> None:
    user = await users.create()
    body = json.dumps({"email": user.email, "password": user.password, "extra": 1})
    response = await client.post(LOGIN, content=body, headers={"content-type": "text/plain"})
    assert response.status_code == 200
    assert response.json()["user"]["id"] == user.id


@pytest.mark.parametrize(
    ("method", "path", "status", "error"),
    [
        ("GET", "/nope", 404, "Not found"),
        ("POST", "/api/v1/nope", 404, "Not found"),
        ("GET", "/ocs/v2.php/apps/dashboard/other", 404, "Not found"),
        ("DELETE", "/healthz", 405, "Method not allowed"),
        ("GET", LOGIN, 405, "Method not allowed"),
        ("PUT", "/api/v1/auth/me", 405, "Method not allowed"),
    ],
)
async def test_unknown_routes_and_methods_are_json(
    client: httpx.AsyncClient, method: str, path: str, status: int, error: str
) -> None:
    response = await client.request(method, path)
    assert (response.status_code, response.json()) == (status, {"error": error})
    assert response.headers["content-type"] == "application/json"
    if status == 405:
        assert response.headers["allow"]


@pytest.fixture(scope="module")
def unreachable_database(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A service whose database cannot be opened: every query raises inside the app."""
    var = tmp_path_factory.mktemp("broken")
    missing = Path(var) / "no" / "such" / "dir" / "x.db"
    config = Config(
        database_url=f"sqlite+aiosqlite:///{missing}",
        secret_key=TEST_SECRET_KEY,
        settings_encryption_key=Fernet.generate_key().decode(),
        var_dir=var,
    )
    with LoopbackServer(create_app(config)) as server:
        yield server.url


async def test_readyz_is_503_when_the_database_is_unreachable(unreachable_database: str) -> None:
    async with httpx.AsyncClient(base_url=unreachable_database) as http:
        response = await http.get("/readyz")
        assert (response.status_code, response.json()) == (503, {"status": "unavailable"})
        assert (await http.get("/healthz")).json() == {"status": "ok"}  # liveness: no I/O


@pytest.mark.parametrize(
    ("method", "path", "kwargs"),
    [
        ("GET", "/api/v1/auth/me", {"headers": {"Authorization": "Bearer cct_x"}}),
        ("POST", LOGIN, {"json": {"email": "a@example.com", "password": "x"}}),
        (
            "GET",
            "/ocs/v2.php/apps/dashboard/api",
            {"headers": {"Authorization": "Bearer cct_x", "OCS-APIRequest": "true"}},
        ),
    ],
)
async def test_unhandled_errors_are_json_500(
    unreachable_database: str, method: str, path: str, kwargs: dict[str, object]
) -> None:
    """Starlette's ServerErrorMiddleware calls the app's `Exception` handler: JSON, not text."""
    async with httpx.AsyncClient(base_url=unreachable_database) as http:
        response = await http.request(method, path, **kwargs)  # type: ignore[arg-type]
    assert response.status_code == 500
    assert response.headers["content-type"] == "application/json"
    assert response.json() == {"error": "Internal server error"}
    no_trace(response)


async def test_413_on_a_kept_alive_connection_then_it_still_serves(
    client: httpx.AsyncClient,
) -> None:
    """The oversized body is read and dropped, so the client gets the 413, not a reset."""
    for _ in range(3):
        assert (await client.get("/healthz")).status_code == 200
        response = await client.post(LOGIN, content=b"z" * (LIMIT * 2))
        assert (response.status_code, response.json()) == TOO_LARGE


async def test_unhandled_error_logs_no_request_data(
    unreachable_database: str, capfd: pytest.CaptureFixture[str]
) -> None:
    secret = "hunter2-do-not-log-me"
    async with httpx.AsyncClient(base_url=unreachable_database) as http:
        response = await http.post(LOGIN, json={"email": "a@example.com", "password": secret})
    assert response.status_code == 500
    out, err = capfd.readouterr()
    assert "unhandled error" in out + err
    assert secret not in out + err
