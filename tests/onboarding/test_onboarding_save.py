"""POST and GET /api/v1/onboarding: the record, the upsert and the brokerage."""

from __future__ import annotations

import asyncio
import json
import re
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from sqlalchemy import func, select

from controlcenter.app import create_app
from controlcenter.auth.models import UserRecord
from controlcenter.config import Config
from controlcenter.onboarding.models import Onboarding
from controlcenter.onboarding.service import OnboardingSaves, UserGoneError
from tests.conftest import AppUser, RunningServer, UserFactory
from tests.dbtools import committed_writes, reading
from tests.fakes.server import LoopbackServer

URL = "/api/v1/onboarding"

# The record's fields in their order, framed by id/userId and the timestamps.
RECORD_KEYS = [
    "id",
    "userId",
    "yearsInBusiness",
    "gciLast12Months",
    "usingOtherCrm",
    "currentCrmName",
    "crmPainPoints",
    "goalsSelected",
    "hasLeadSource",
    "leadSourceName",
    "wantsMoreLeads",
    "leadTypesDesired",
    "leadsPerMonthTarget",
    "channelsSelected",
    "systemsToConnect",
    "createdAt",
    "updatedAt",
]
ISO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")

FULL = {
    "yearsInBusiness": "10+",
    "gciLast12Months": "$100k-$250k",
    "usingOtherCrm": True,
    "currentCrmName": "Spreadsheet",
    "crmPainPoints": ["follow-up", "café ☕"],
    "goalsSelected": ["grow"],
    "hasLeadSource": False,
    "leadSourceName": "",
    "wantsMoreLeads": True,
    "leadTypesDesired": [],
    "leadsPerMonthTarget": "20",
    "channelsSelected": ["sms", "email"],
    "systemsToConnect": ["calendar"],
}


async def me(client: httpx.AsyncClient, user: AppUser) -> dict[str, Any]:
    body: dict[str, Any] = (await client.get("/api/v1/auth/me", headers=user.headers)).json()
    found: dict[str, Any] = body["user"]
    return found


async def test_get_before_any_save_is_null(client: httpx.AsyncClient, users: UserFactory) -> None:
    user = await users.create()
    response = await client.get(URL, headers=user.headers)
    assert (response.status_code, response.json()) == (200, {"onboarding": None})


async def test_full_save_returns_the_record_with_arrays_as_json_strings(
    client: httpx.AsyncClient, users: UserFactory
) -> None:
    user = await users.create()
    response = await client.post(
        URL, json={**FULL, "brokerageName": "Acme Realty"}, headers=user.headers
    )
    assert response.status_code == 200
    body = response.json()
    assert list(body) == ["success", "onboarding"] and body["success"] is True
    record = body["onboarding"]
    assert list(record) == RECORD_KEYS
    assert record["userId"] == user.id and record["id"]
    for name, sent in FULL.items():
        if isinstance(sent, list):
            # Stored and returned as the JSON text, compact like JSON.stringify.
            assert isinstance(record[name], str)
            assert json.loads(record[name]) == sent
            assert record[name] == json.dumps(sent, ensure_ascii=False, separators=(",", ":"))
        else:
            assert record[name] == sent
    assert record["crmPainPoints"] == '["follow-up","café ☕"]'
    assert record["leadTypesDesired"] == "[]"
    assert ISO.match(record["createdAt"]) and ISO.match(record["updatedAt"])
    assert "brokerageName" not in record
    assert (await client.get(URL, headers=user.headers)).json() == {"onboarding": record}
    assert (await me(client, user))["brokerage"] == "Acme Realty"


async def test_unset_fields_are_null_and_unknown_keys_are_not_stored(
    client: httpx.AsyncClient, users: UserFactory
) -> None:
    user = await users.create()
    response = await client.post(
        URL,
        json={"wantsMoreLeads": False, "favouriteColour": "blue", "id": "mine", "userId": "x"},
        headers=user.headers,
    )
    record = response.json()["onboarding"]
    assert list(record) == RECORD_KEYS
    assert record["wantsMoreLeads"] is False
    assert record["userId"] == user.id and record["id"] != "mine"
    assert all(record[name] is None for name in RECORD_KEYS[2:-2] if name != "wantsMoreLeads")


async def test_partial_update_leaves_omitted_fields_unchanged(
    client: httpx.AsyncClient, users: UserFactory
) -> None:
    user = await users.create()
    first = (await client.post(URL, json=FULL, headers=user.headers)).json()["onboarding"]
    change = {"yearsInBusiness": "3", "usingOtherCrm": False, "goalsSelected": ["a", "b"]}
    second = (await client.post(URL, json=change, headers=user.headers)).json()["onboarding"]
    assert second["id"] == first["id"] and second["createdAt"] == first["createdAt"]
    assert second["updatedAt"] >= first["updatedAt"]
    expected = {**first, **change, "goalsSelected": '["a","b"]', "updatedAt": second["updatedAt"]}
    assert second == expected
    # An empty object is a valid save that changes nothing.
    third = (await client.post(URL, json={}, headers=user.headers)).json()["onboarding"]
    assert {**third, "updatedAt": None} == {**second, "updatedAt": None}
    assert (await client.get(URL, headers=user.headers)).json()["onboarding"] == third


async def test_brokerage_is_set_only_by_a_non_empty_brokerage_name(
    client: httpx.AsyncClient, users: UserFactory
) -> None:
    user = await users.create()
    assert (await me(client, user))["brokerage"] is None
    await client.post(URL, json={"brokerageName": ""}, headers=user.headers)
    assert (await me(client, user))["brokerage"] is None
    await client.post(URL, json={"brokerageName": "First"}, headers=user.headers)
    assert (await me(client, user))["brokerage"] == "First"
    for body in ({"brokerageName": ""}, {"yearsInBusiness": "2"}):
        response = await client.post(URL, json=body, headers=user.headers)
        assert response.status_code == 200
        assert (await me(client, user))["brokerage"] == "First"
    await client.post(URL, json={"brokerageName": "Second"}, headers=user.headers)
    assert (await me(client, user))["brokerage"] == "Second"


async def test_timestamps_are_utc_iso_strings(
    client: httpx.AsyncClient, users: UserFactory
) -> None:
    user = await users.create()
    record = (await client.post(URL, json={}, headers=user.headers)).json()["onboarding"]
    created = datetime.fromisoformat(record["createdAt"].replace("Z", "+00:00"))
    assert created.tzinfo == UTC
    assert abs((datetime.now(UTC) - created).total_seconds()) < 60


async def test_concurrent_first_saves_make_one_record(
    client: httpx.AsyncClient, server: RunningServer, users: UserFactory
) -> None:
    user = await users.create()
    responses = await asyncio.gather(
        *(
            client.post(URL, json={"leadsPerMonthTarget": str(n)}, headers=user.headers)
            for n in range(8)
        )
    )
    assert [r.status_code for r in responses] == [200] * 8
    assert len({r.json()["onboarding"]["id"] for r in responses}) == 1
    async with reading(server.db) as db:
        count = await db.scalar(select(func.count()).select_from(Onboarding))
    assert count == 1


async def test_a_deleted_user_cannot_save(server: RunningServer) -> None:
    with pytest.raises(UserGoneError):
        await OnboardingSaves(server.db).save("no-such-user", {"yearsInBusiness": "1"})
    async with reading(server.db) as db:
        assert await db.scalar(select(func.count()).select_from(Onboarding)) == 0


async def test_a_whitespace_brokerage_name_is_truthy_and_stored_as_sent(
    client: httpx.AsyncClient, users: UserFactory
) -> None:
    user = await users.create()
    response = await client.post(URL, json={"brokerageName": "  "}, headers=user.headers)
    assert response.status_code == 200
    assert (await me(client, user))["brokerage"] == "  "


async def test_a_save_is_one_write_transaction(
    client: httpx.AsyncClient, server: RunningServer, users: UserFactory
) -> None:
    """Record, brokerage and jobs commit together: one write transaction per save."""
    user = await users.create()
    body = {**FULL, "brokerageName": "Acme Realty"}
    with committed_writes(server.db) as committed:
        for _ in range(2):  # the first save creates the record, the second updates it
            response = await client.post(URL, json=body, headers=user.headers)
            assert response.status_code == 200
    # Only the saves': the app's own tasks (chat liveness, the outbox) write now and then.
    saves = [statements for statements in committed if _any_writes(statements, "onboarding")]
    assert len(saves) == 2
    for statements in saves:
        assert any(s.lstrip().startswith("INSERT INTO outbox_jobs") for s in statements)
    # The brokerage is set in the same transaction (where it changed: the first save only, see
    # `test_an_unchanged_brokerage_is_not_written_again`).
    assert all(_any_writes(statements, "users") for statements in saves)
    # No credential kept in memory holds the brokerage: a save makes no process forget them.
    assert not any(_any_writes(statements, "change_stamps") for statements in saves)
    # Nothing is read first: the write lock (SQLite) is held for the writes alone.
    assert not any(s.lstrip().startswith("SELECT") for statements in saves for s in statements)


def _any_writes(statements: list[str], table: str) -> bool:
    """Whether one of `statements` inserts into or updates `table`."""
    written = re.compile(rf"\s*(INSERT INTO|UPDATE) {table}\b")
    return any(written.match(statement) for statement in statements)


async def test_an_unchanged_brokerage_is_not_written_again(
    client: httpx.AsyncClient, server: RunningServer, users: UserFactory
) -> None:
    user = await users.create()
    body = {"brokerageName": "Acme Realty"}
    await client.post(URL, json=body, headers=user.headers)
    async with reading(server.db) as db:
        before = await db.scalar(select(UserRecord.updated_at).where(UserRecord.id == user.id))
    await client.post(URL, json=body, headers=user.headers)
    async with reading(server.db) as db:
        assert (
            await db.scalar(select(UserRecord.updated_at).where(UserRecord.id == user.id)) == before
        )
    await client.post(URL, json={"brokerageName": "Other Realty"}, headers=user.headers)
    async with reading(server.db) as db:
        assert (
            await db.scalar(select(UserRecord.updated_at).where(UserRecord.id == user.id)) != before
        )
    assert (await me(client, user))["brokerage"] == "Other Realty"


async def test_a_new_brokerage_shows_at_once_in_every_instance(
    client: httpx.AsyncClient, config: Config, users: UserFactory
) -> None:
    """/auth/me and the account page show the brokerage a save set, at once, in the instance
    that saved and in another one (its own process, caches and database handle), though
    both had checked and kept the caller's credential before."""
    user = await users.create()
    with LoopbackServer(create_app(config)) as other:
        async with httpx.AsyncClient(base_url=other.url, timeout=30) as second:
            for http in (client, second):
                assert (await me(http, user))["brokerage"] is None
            for name in ("Harbour Realty", "Quayside Realty"):
                response = await client.post(
                    URL, json={"brokerageName": name}, headers=user.headers
                )
                assert response.status_code == 200
                for http in (client, second):
                    assert (await me(http, user))["brokerage"] == name
                    page = await http.get("/account", headers=user.headers)
                    assert page.status_code == 200 and f"<dd>{name}</dd>" in page.text


async def test_an_update_keeps_id_and_created_at_and_returns_the_stored_record(
    client: httpx.AsyncClient, server: RunningServer, users: UserFactory
) -> None:
    user = await users.create()
    first = (await client.post(URL, json=FULL, headers=user.headers)).json()["onboarding"]
    second = (await client.post(URL, json={"usingOtherCrm": False}, headers=user.headers)).json()[
        "onboarding"
    ]
    assert second["id"] == first["id"] and second["createdAt"] == first["createdAt"]
    assert second["updatedAt"] >= first["updatedAt"]
    assert second == {**first, "usingOtherCrm": False, "updatedAt": second["updatedAt"]}
    stored = (await client.get(URL, headers=user.headers)).json()["onboarding"]
    assert stored == second


async def test_saves_arriving_together_each_succeed_and_fail_alone(
    server: RunningServer, users: UserFactory
) -> None:
    """Saves of many users at once are each written; a user gone meanwhile fails only its
    own save."""
    saves = OnboardingSaves(server.db)
    brokers = [await users.create() for _ in range(12)]
    ids = [broker.id for broker in brokers[:6]] + ["no-such-user"] + [b.id for b in brokers[6:]]
    results = await asyncio.gather(
        *(saves.save(user_id, {"leadsPerMonthTarget": user_id}) for user_id in ids),
        return_exceptions=True,
    )
    assert [type(r) for r in results] == [dict] * 6 + [UserGoneError] + [dict] * 6
    for user_id, result in zip(ids, results, strict=True):
        if isinstance(result, dict):
            assert result["userId"] == user_id and result["leadsPerMonthTarget"] == user_id
    async with reading(server.db) as db:
        stored = await db.scalars(select(Onboarding.userId))
        assert sorted(stored) == sorted(broker.id for broker in brokers)
