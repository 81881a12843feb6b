"""Bodies the onboarding POST refuses; none changes the database."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from tests.conftest import AppUser, RunningServer, UserFactory
from tests.dbtools import failing_write, snapshot

URL = "/api/v1/onboarding"
INVALID = {"error": "Validation failed"}
FAILED = {"error": "Failed to save onboarding"}

# Each is JSON a client can send; every one breaks a field's type (no coercion).
INVALID_BODIES: list[Any] = [
    {"usingOtherCrm": "true"},
    {"hasLeadSource": 1},
    {"wantsMoreLeads": None},
    {"yearsInBusiness": 5},
    {"gciLast12Months": 100000.5},
    {"currentCrmName": None},
    {"leadSourceName": ["x"]},
    {"leadsPerMonthTarget": True},
    {"crmPainPoints": "a,b"},
    {"goalsSelected": ["ok", 2]},
    {"leadTypesDesired": [None]},
    {"channelsSelected": None},
    {"systemsToConnect": {"0": "crm"}},
    {"channelsSelected": [["nested"]]},
    {"brokerageName": None},
    {"brokerageName": 7},
    {"brokerageName": "x" * 501},
    {"currentCrmName": "nul\u0000inside"},
    {"yearsInBusiness": "3", "usingOtherCrm": "no"},  # one bad field spoils the whole body
    [],
    [{"yearsInBusiness": "3"}],
    "yearsInBusiness",
    42,
    True,
    None,
]

UNPARSEABLE_BODIES: list[bytes] = [
    b"",
    b"{",
    b"{'yearsInBusiness': '3'}",
    b'{"yearsInBusiness": "3"} trailing',
    b'{"yearsInBusiness": "\xff\xfe"}',  # not UTF-8
    b"NaN",
    b'{"yearsInBusiness": Infinity}',
]


def assert_invalid(response: httpx.Response) -> list[list[Any]]:
    """The 400 `Validation failed`, with `details` (`[{path, message, type}]`) added."""
    body = response.json()
    assert response.status_code == 400, body
    assert body["error"] == INVALID["error"] and set(body) == {"error", "details"}, body
    assert body["details"], body
    for issue in body["details"]:
        assert set(issue) == {"path", "message", "type"}
        assert isinstance(issue["path"], list) and issue["message"] and issue["type"]
    return [issue["path"] for issue in body["details"]]


async def test_details_name_each_wrong_field(
    client: httpx.AsyncClient, server: RunningServer, users: UserFactory
) -> None:
    user = await users.create()
    for body, paths in (
        ({"usingOtherCrm": "true"}, [["usingOtherCrm"]]),
        ({"goalsSelected": ["ok", 2]}, [["goalsSelected", 1]]),
        ({"brokerageName": "x" * 501}, [["brokerageName"]]),
        ({"yearsInBusiness": 5, "wantsMoreLeads": None},
         [["yearsInBusiness"], ["wantsMoreLeads"]]),
        ([], [[]]),
    ):  # fmt: skip
        response = await client.post(URL, json=body, headers=user.headers)
        assert assert_invalid(response) == paths, body
    typed = await client.post(URL, json={"usingOtherCrm": "true"}, headers=user.headers)
    assert typed.json()["details"] == [
        {
            "path": ["usingOtherCrm"],
            "message": "Input should be a valid boolean",
            "type": "bool_type",
        }
    ]
    # The input itself is never echoed: it may be anything a user typed.
    secretish = await client.post(URL, json={"yearsInBusiness": 123456789}, headers=user.headers)
    assert "123456789" not in secretish.text


async def _seed(client: httpx.AsyncClient, user: AppUser) -> None:
    body = {"yearsInBusiness": "7", "crmPainPoints": ["x"], "brokerageName": "Kept"}
    assert (await client.post(URL, json=body, headers=user.headers)).status_code == 200


@pytest.mark.parametrize("seeded", [False, True], ids=["no-record", "existing-record"])
async def test_invalid_bodies_are_400_and_change_nothing(
    client: httpx.AsyncClient, server: RunningServer, users: UserFactory, seeded: bool
) -> None:
    user = await users.create()
    if seeded:
        await _seed(client, user)
    before = await snapshot(server.db)
    for body in INVALID_BODIES:
        # content=, not json=: httpx sends no body at all for json=None.
        response = await client.post(URL, content=json.dumps(body), headers=user.headers)
        assert_invalid(response)
    assert await snapshot(server.db) == before


async def test_a_lone_surrogate_is_invalid(
    client: httpx.AsyncClient, server: RunningServer, users: UserFactory
) -> None:
    # Valid JSON syntax, but not text any database can store.
    user = await users.create()
    before = await snapshot(server.db)
    for raw in (b'{"currentCrmName": "\\ud800"}', b'{"goalsSelected": ["a\\udfff"]}'):
        response = await client.post(URL, content=raw, headers=user.headers)
        assert_invalid(response)
    assert await snapshot(server.db) == before


async def test_unparseable_bodies_are_500_and_change_nothing(
    client: httpx.AsyncClient, server: RunningServer, users: UserFactory
) -> None:
    user = await users.create()
    await _seed(client, user)
    before = await snapshot(server.db)
    for raw in UNPARSEABLE_BODIES:
        response = await client.post(
            URL, content=raw, headers={**user.headers, "Content-Type": "application/json"}
        )
        assert (response.status_code, response.json()) == (500, FAILED), raw
        assert response.headers["content-type"] == "application/json"
    assert await snapshot(server.db) == before


async def test_a_body_over_one_mebibyte_is_413_and_changes_nothing(
    client: httpx.AsyncClient, server: RunningServer, users: UserFactory
) -> None:
    user = await users.create()
    before = await snapshot(server.db)
    body = json.dumps({"yearsInBusiness": "x" * (1024 * 1024)})
    response = await client.post(URL, content=body, headers=user.headers)
    assert response.status_code == 413
    assert response.json() == {"error": "Request body too large"}
    assert await snapshot(server.db) == before


async def test_a_database_failure_mid_save_is_500_and_saves_nothing(
    client: httpx.AsyncClient, server: RunningServer, users: UserFactory
) -> None:
    user = await users.create()
    await _seed(client, user)
    before = await snapshot(server.db)
    # The last of the three jobs fails, after the record, the brokerage and two jobs were written.
    async with failing_write(server.db, "outbox_jobs", "NEW.kind = 'crm.sync_user'"):
        response = await client.post(
            URL,
            json={"yearsInBusiness": "1", "gciLast12Months": "250", "brokerageName": "Changed"},
            headers=user.headers,
        )
        after = await snapshot(server.db)
    assert (response.status_code, response.json()) == (500, FAILED)
    assert after == before
    record = (await client.get(URL, headers=user.headers)).json()["onboarding"]
    assert record["yearsInBusiness"] == "7"
    # With the failure gone, the same request goes through.
    again = await client.post(URL, json={"yearsInBusiness": "1"}, headers=user.headers)
    assert again.status_code == 200 and again.json()["onboarding"]["yearsInBusiness"] == "1"
