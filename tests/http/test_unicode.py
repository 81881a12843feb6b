"""Lone surrogates and NUL are invalid input everywhere: 400 with the endpoint's
usual error body, never a 500, a dropped connection or Python's codec message; nothing stored.
"""

from __future__ import annotations

import httpx
import pytest

from tests.conftest import RunningServer, UserFactory
from tests.dbtools import snapshot
from tests.http.test_bad_input import no_trace

LOGIN = "/api/v1/auth/login"
CHAT = "/api/v1/control-center/chat"
ONBOARDING = "/api/v1/onboarding"
SETTINGS = "/api/v1/admin/settings"
CONVERSATIONS = "/api/v1/control-center/conversations"
CHAT_INVALID = {
    "error": "Invalid text: strings must not contain NUL characters or unpaired surrogates"
}
NUL = {"message": "String must not contain NUL characters", "type": "string_nul"}
SURROGATE = {"message": "String must be valid Unicode text", "type": "string_unicode"}

# Each escape as it travels in the JSON text (json.dumps would refuse to build some of them).
BAD = {
    "lone high surrogate": (r"\ud800", SURROGATE),
    "lone low surrogate": (r"\udfff", SURROGATE),
    "reversed pair": (r"\udc00\ud800", SURROGATE),
    "NUL": (r"a\u0000b", NUL),
}


def body(template: str, escape: str) -> bytes:
    return template.replace("~~", escape).encode()


@pytest.mark.parametrize("bad", list(BAD))
@pytest.mark.parametrize(
    "template",
    ['{"email": "~~x@example.com", "password": "pw"}', '{"email": "a@b.c", "password": "~~"}'],
)
async def test_login(
    client: httpx.AsyncClient, server: RunningServer, users: UserFactory, template: str, bad: str
) -> None:
    await users.create()
    before = await snapshot(server.db)
    escape, problem = BAD[bad]
    response = await client.post(LOGIN, content=body(template, escape))
    field = "email" if template.startswith('{"email": "~~') else "password"
    assert response.status_code == 400
    assert response.json() == {
        "error": "Validation failed",
        "details": [{"path": [field], **problem}],
    }
    no_trace(response)
    assert await snapshot(server.db) == before


async def test_login_with_valid_escapes_still_signs_in(
    client: httpx.AsyncClient, users: UserFactory
) -> None:
    user = await users.create()
    escaped = "".join(f"\\u{ord(c):04x}" for c in user.password)  # every character escaped
    raw = f'{{"email": "{user.email}", "password": "{escaped}"}}'.encode()
    response = await client.post(LOGIN, content=raw)
    assert response.status_code == 200
    pair = await client.post(LOGIN, content=b'{"email": "\\ud83d\\ude00@x.y", "password": "p"}')
    assert (pair.status_code, pair.json()) == (401, {"error": "Invalid credentials"})


CHAT_TEMPLATES = [
    '{"message": "hi ~~"}',
    '{"message": "hi", "conversationId": "~~"}',
    '{"message": "hi", "provider": "provider_a~~"}',
    '{"message": "hi", "extra": {"k": ["~~"]}}',
    '{"message": "hi", "~~": 1}',
]
ONBOARDING_TEMPLATES = [
    '{"brokerageName": "~~"}',
    '{"crmPainPoints": ["ok", "~~"]}',
    '{"yearsInBusiness": "5", "unknownKey": "~~"}',
]


@pytest.mark.parametrize("bad", list(BAD))
@pytest.mark.parametrize("template", CHAT_TEMPLATES)
async def test_chat(
    client: httpx.AsyncClient, server: RunningServer, users: UserFactory, template: str, bad: str
) -> None:
    """Chat's plain error (the pre-stream checks answer `{error}` only)."""
    user = await users.create()
    before = await snapshot(server.db)
    response = await client.post(CHAT, content=body(template, BAD[bad][0]), headers=user.headers)
    assert (response.status_code, response.json()) == (400, CHAT_INVALID)
    assert response.headers["content-type"] == "application/json"
    no_trace(response)
    assert await snapshot(server.db) == before


@pytest.mark.parametrize("bad", list(BAD))
@pytest.mark.parametrize("template", ONBOARDING_TEMPLATES)
async def test_onboarding(
    client: httpx.AsyncClient, server: RunningServer, users: UserFactory, template: str, bad: str
) -> None:
    """`Validation failed`, with `details` naming the place like every onboarding 400."""
    user = await users.create()
    before = await snapshot(server.db)
    raw = body(template, BAD[bad][0])
    response = await client.post(ONBOARDING, content=raw, headers=user.headers)
    assert response.status_code == 400
    assert response.json()["error"] == "Validation failed"
    assert response.json()["details"]
    no_trace(response)
    assert await snapshot(server.db) == before


@pytest.mark.parametrize("bad", list(BAD))
async def test_settings(
    client: httpx.AsyncClient, server: RunningServer, users: UserFactory, bad: str
) -> None:
    admin = await users.create("super_admin")
    before = await snapshot(server.db)
    escape, problem = BAD[bad]
    raw = body('{"tagHighGCI": "VIP", "providerAApiKey": "sk-~~"}', escape)
    response = await client.put(SETTINGS, content=raw, headers=admin.headers)
    assert response.status_code == 400
    assert response.json() == {
        "error": "Validation failed",
        "details": [{"path": ["providerAApiKey"], **problem}],
    }
    no_trace(response)
    assert await snapshot(server.db) == before


@pytest.mark.parametrize("path", ["%00", "a%00b", "%ED%A0%80", "%C0%80"])
@pytest.mark.parametrize("method", ["GET", "DELETE"])
async def test_conversation_ids_in_the_path(
    client: httpx.AsyncClient, users: UserFactory, path: str, method: str
) -> None:
    user = await users.create()
    response = await client.request(method, f"{CONVERSATIONS}/{path}", headers=user.headers)
    assert (response.status_code, response.json()) == (404, {"error": "Conversation not found"})
