"""The chat pre-stream checks, in their order, with exact status, body and content type."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.chat.helpers import CHAT, count_rows, set_settings
from tests.conftest import AppUser, RunningServer, UserFactory

JSON = "application/json"
KEYS = {"providerAApiKey": "key-a-0123456789", "providerBApiKey": "key-b-0123456789"}


def assert_error(response: httpx.Response, status: int, message: str) -> None:
    assert response.status_code == status
    assert response.headers["content-type"] == JSON
    assert response.json() == {"error": message}


@pytest.fixture
async def keyed_user(server: RunningServer, users: UserFactory) -> AppUser:
    user = await users.create()
    await set_settings(server, KEYS, user)
    return user


async def test_no_session_is_401_before_anything_else(client: httpx.AsyncClient) -> None:
    for content in (b'{"message": "hi"}', b"{nope", b""):
        response = await client.post(CHAT, content=content)
        assert_error(response, 401, "Unauthorized")
    bad = await client.post(CHAT, json={"message": "hi"}, headers={"Authorization": "Bearer x.y.z"})
    assert_error(bad, 401, "Unauthorized")


@pytest.mark.parametrize("content", [b"{nope", b"", b'{"message": "hi"', b"\xff\xfe", b"NaN"])
async def test_unparseable_body(
    client: httpx.AsyncClient, keyed_user: AppUser, content: bytes
) -> None:
    response = await client.post(CHAT, content=content, headers=keyed_user.headers)
    assert_error(response, 400, "Invalid JSON body")


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"message": ""},
        {"message": " \n\t "},
        {"message": 5},
        {"message": None},
        {"message": ["hi"]},
        [],
        "hello",
        {"message": "", "provider": "nope"},  # the message is checked before the provider
    ],
)
async def test_missing_or_empty_message(
    client: httpx.AsyncClient, keyed_user: AppUser, server: RunningServer, body: Any
) -> None:
    response = await client.post(CHAT, json=body, headers=keyed_user.headers)
    assert_error(response, 400, "Missing or empty message")
    assert await count_rows(server) == (0, 0)


async def test_json_null_body_has_no_message(
    client: httpx.AsyncClient, keyed_user: AppUser
) -> None:
    response = await client.post(CHAT, content=b"null", headers=keyed_user.headers)
    assert_error(response, 400, "Missing or empty message")


@pytest.mark.parametrize("provider", ["provider_c", "", "PROVIDER_A", 1, None, ["provider_a"]])
async def test_provider_not_allowed(
    client: httpx.AsyncClient, users: UserFactory, server: RunningServer, provider: Any
) -> None:
    user = await users.create()  # no keys at all: the provider is checked before the key
    response = await client.post(
        CHAT, json={"message": "hi", "provider": provider}, headers=user.headers
    )
    assert_error(response, 400, "Invalid provider: must be one of provider_a, provider_b")
    assert await count_rows(server) == (0, 0)


@pytest.mark.parametrize(
    ("body", "provider", "other_key"),
    [
        ({"message": "hi"}, "provider_a", "providerBApiKey"),  # the default provider
        ({"message": "hi", "provider": "provider_a"}, "provider_a", "providerBApiKey"),
        ({"message": "hi", "provider": "provider_b"}, "provider_b", "providerAApiKey"),
    ],
)
async def test_key_not_configured(
    client: httpx.AsyncClient,
    users: UserFactory,
    server: RunningServer,
    body: dict[str, Any],
    provider: str,
    other_key: str,
) -> None:
    user = await users.create()
    await set_settings(server, {other_key: KEYS[other_key]}, user)  # only the other one is set
    response = await client.post(CHAT, json=body, headers=user.headers)
    assert_error(response, 400, f"No API key configured for {provider}. Please add it in settings.")
    assert await count_rows(server) == (0, 0)
