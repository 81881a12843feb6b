"""PUT bodies that are refused and failures of GET and PUT."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from cryptography.fernet import Fernet

from controlcenter.admin_settings.models import Setting
from controlcenter.admin_settings.schemas import VALUE_MAX_CHARS
from tests.conftest import RunningServer, UserFactory
from tests.dbtools import failing_write, snapshot, writing

URL = "/api/v1/admin/settings"
STRING = {"message": "Input should be a valid string", "type": "string_type"}
NOT_OBJECT = [{"path": [], "message": "Input should be a valid dictionary", "type": "dict_type"}]
UPDATE_FAILED = {"error": "Failed to update settings"}

CASES: list[tuple[Any, list[dict[str, Any]]]] = [
    ({"tagHighGCI": None}, [{"path": ["tagHighGCI"], **STRING}]),
    ({"dfyPriceFullSetup": 499}, [{"path": ["dfyPriceFullSetup"], **STRING}]),
    ({"crmAgencyId": True}, [{"path": ["crmAgencyId"], **STRING}]),
    ({"tasksListId": ["a"]}, [{"path": ["tasksListId"], **STRING}]),
    ({"mcpServerUrl": {"url": "x"}}, [{"path": ["mcpServerUrl"], **STRING}]),
    (
        {"tagHighGCI": None, "crmAgencyId": 1, "tasksListId": "fine"},
        [{"path": ["crmAgencyId"], **STRING}, {"path": ["tagHighGCI"], **STRING}],
    ),
    ([], NOT_OBJECT),
    ([{"tagHighGCI": "x"}], NOT_OBJECT),
    ("tagHighGCI", NOT_OBJECT),
    (3, NOT_OBJECT),
    (None, NOT_OBJECT),
    (False, NOT_OBJECT),
]
BAD_EMAILS = [
    "not-an-email",
    "a@b",
    "@example.com",
    "two@@example.com",
    " ops@example.com",
    "x@localhost",
]


def by_path(details: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(details, key=lambda item: item["path"])


@pytest.fixture
async def admin(users: UserFactory) -> Any:
    return await users.create("super_admin")


async def test_wrong_types_are_400_with_details_and_change_nothing(
    client: httpx.AsyncClient, server: RunningServer, admin: Any
) -> None:
    await client.put(URL, json={"tagHighGCI": "kept"}, headers=admin.headers)
    before = await snapshot(server.db)
    for body, details in CASES:
        response = await client.put(URL, content=json.dumps(body), headers=admin.headers)
        assert response.status_code == 400, body
        answer = response.json()
        assert list(answer) == ["error", "details"]
        assert answer["error"] == "Validation failed"
        assert by_path(answer["details"]) == by_path(details), body
    assert await snapshot(server.db) == before


async def test_bad_emails_are_400_and_nothing_else_in_the_body_is_saved(
    client: httpx.AsyncClient, server: RunningServer, admin: Any
) -> None:
    before = await snapshot(server.db)
    for email in BAD_EMAILS:
        response = await client.put(
            URL, json={"notificationEmail": email, "tagHighGCI": "new"}, headers=admin.headers
        )
        assert response.status_code == 400, email
        answer = response.json()
        assert answer["error"] == "Validation failed"
        [issue] = answer["details"]
        assert issue["path"] == ["notificationEmail"] and issue["type"] == "value_error"
        assert issue["message"].startswith("value is not a valid email address: ")
    assert await snapshot(server.db) == before


async def test_invalid_text_is_400(
    client: httpx.AsyncClient, server: RunningServer, admin: Any
) -> None:
    before = await snapshot(server.db)
    for raw in (b'{"tasksApiKey": "\\ud800abc"}', b'{"tasksApiKey": "a\\u0000b"}'):
        response = await client.put(URL, content=raw, headers=admin.headers)
        assert response.status_code == 400
        [issue] = response.json()["details"]
        assert issue["path"] == ["tasksApiKey"]
        assert issue["type"] in {"string_unicode", "string_nul"}
    assert await snapshot(server.db) == before


async def test_values_are_bounded_in_length(
    client: httpx.AsyncClient, server: RunningServer, admin: Any
) -> None:
    """A private key fits; a value past the bound is refused, whatever the setting."""
    key = "-----BEGIN PRIVATE KEY-----\n" + "A" * 3300 + "\n-----END PRIVATE KEY-----"
    at_bound = {"crmPrivateToken": "t" * VALUE_MAX_CHARS, "tasksApiKey": key}
    response = await client.put(URL, json=at_bound, headers=admin.headers)
    assert (response.status_code, response.json()) == (200, {"success": True})
    before = await snapshot(server.db)
    for name in ("crmPrivateToken", "tagHighGCI", "notificationEmail"):
        over = {name: "x" * (VALUE_MAX_CHARS + 1), "tasksListId": "kept-out"}
        response = await client.put(URL, json=over, headers=admin.headers)
        assert response.status_code == 400, name
        assert response.json()["details"] == [
            {
                "path": [name],
                "message": f"String should have at most {VALUE_MAX_CHARS} characters",
                "type": "string_too_long",
            }
        ]
    huge = await client.put(URL, json={"tagHighGCI": "x" * 900_000}, headers=admin.headers)
    assert huge.status_code == 400
    assert await snapshot(server.db) == before


async def test_details_never_echo_the_values_sent(client: httpx.AsyncClient, admin: Any) -> None:
    secret = "sk-live-VERYSECRET-0042"
    response = await client.put(
        URL,
        json={"paymentSecretKey": secret, "notificationEmail": f"{secret}@", "tasksApiKey": 5},
        headers=admin.headers,
    )
    assert response.status_code == 400
    assert "VERYSECRET" not in response.text


async def test_unparseable_bodies_are_500_and_change_nothing(
    client: httpx.AsyncClient, server: RunningServer, admin: Any
) -> None:
    await client.put(URL, json={"tagHighGCI": "kept"}, headers=admin.headers)
    before = await snapshot(server.db)
    for raw in (b"", b"{", b'{"tagHighGCI": "x",}', b'{"tagHighGCI": "\xff"}', b"NaN", b"{} {}"):
        response = await client.put(
            URL, content=raw, headers={**admin.headers, "Content-Type": "application/json"}
        )
        assert (response.status_code, response.json()) == (500, UPDATE_FAILED), raw
    assert await snapshot(server.db) == before


async def test_a_failure_mid_save_saves_none_of_the_values(
    client: httpx.AsyncClient,
    server: RunningServer,
    admin: Any,
    capsys: pytest.CaptureFixture[str],
) -> None:
    secret = "sk-ant-SHOULD-NOT-LEAK-9f3e"
    before = await snapshot(server.db)
    body = {"crmAgencyId": "agency", "providerAApiKey": secret, "tagHighGCI": "VIP"}
    async with failing_write(server.db, "settings", "NEW.name = 'tagHighGCI'"):
        response = await client.put(URL, json=body, headers=admin.headers)
        after = await snapshot(server.db)
    assert (response.status_code, response.json()) == (500, UPDATE_FAILED)
    assert after == before
    captured = capsys.readouterr()
    assert "saving settings failed" in captured.out + captured.err
    assert secret not in captured.out + captured.err
    assert (await client.put(URL, json=body, headers=admin.headers)).status_code == 200


async def test_get_is_500_when_a_value_cannot_be_decrypted(
    client: httpx.AsyncClient, server: RunningServer, admin: Any
) -> None:
    await client.put(URL, json={"tagHighGCI": "VIP"}, headers=admin.headers)
    foreign = Fernet(Fernet.generate_key()).encrypt(b"under another key").decode()
    async with writing(server.db) as db:
        db.add(Setting(name="crmAgencyId", value_encrypted=foreign))
    response = await client.get(URL, headers=admin.headers)
    assert (response.status_code, response.json()) == (500, {"error": "Failed to fetch settings"})
    assert "another key" not in response.text
