"""Input bounds: onboarding fields, the chat message, the conversation list."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import httpx
import pytest
from sqlalchemy import func, select

from controlcenter.chat.models import ConversationRow
from controlcenter.db import utcnow
from controlcenter.onboarding.models import Onboarding
from controlcenter.outbox.models import OutboxJob
from tests.conftest import AppUser, RunningServer, UserFactory
from tests.dbtools import reading, writing

ONBOARDING = "/api/v1/onboarding"
CHAT = "/api/v1/control-center/chat"
CONVERSATIONS = "/api/v1/control-center/conversations"
INVALID = {"error": "Validation failed"}


@pytest.fixture
async def user(users: UserFactory) -> AppUser:
    return await users.create()


async def count(server: RunningServer, model: Any) -> int:
    async with reading(server.db) as db:
        return int(await db.scalar(select(func.count()).select_from(model)) or 0)


@pytest.mark.parametrize(
    "body",
    [
        {"yearsInBusiness": "x" * 10_001},
        {"currentCrmName": "x" * 1_000_000},  # a megabyte in one field
        {"leadSourceName": "é" * 10_001},  # characters, not bytes
        {"goalsSelected": ["x"] * 101},
        {"systemsToConnect": ["x"] * 150_000},  # a huge array
        {"crmPainPoints": ["x" * 1_001]},
        {"channelsSelected": ["ok", "x" * 1_001]},
    ],
    ids=["string", "huge string", "multibyte", "101 items", "150,000 items", "long item", "mix"],
)
async def test_oversized_onboarding_fields_are_400_and_nothing_is_stored_or_queued(
    client: httpx.AsyncClient, server: RunningServer, user: AppUser, body: dict[str, Any]
) -> None:
    response = await client.post(ONBOARDING, json=body, headers=user.headers)
    assert response.status_code == 400
    assert response.json()["error"] == INVALID["error"]
    [detail] = response.json()["details"]  # the field named, in pydantic's words
    assert detail["path"][0] == next(iter(body))
    assert detail["type"] in {"string_too_long", "too_long"}
    assert await count(server, Onboarding) == 0
    assert await count(server, OutboxJob) == 0


async def test_onboarding_fields_at_their_bounds_are_saved(
    client: httpx.AsyncClient, user: AppUser
) -> None:
    body = {
        "yearsInBusiness": "x" * 10_000,
        "goalsSelected": ["y" * 1_000] * 100,
        "leadSourceName": "é" * 10_000,
    }
    response = await client.post(ONBOARDING, json=body, headers=user.headers)
    assert response.status_code == 200
    saved = response.json()["onboarding"]
    assert saved["yearsInBusiness"] == body["yearsInBusiness"]
    assert saved["leadSourceName"] == body["leadSourceName"]


async def test_a_chat_message_over_32000_characters_is_400(
    client: httpx.AsyncClient, server: RunningServer, user: AppUser
) -> None:
    response = await client.post(CHAT, json={"message": "é" * 32_001}, headers=user.headers)
    assert (response.status_code, response.json()) == (
        400,
        {"error": "Message too long: at most 32000 characters"},
    )
    assert await count(server, ConversationRow) == 0
    # At the bound the message passes this check and meets the next (no API key here).
    response = await client.post(CHAT, json={"message": "é" * 32_000}, headers=user.headers)
    assert response.status_code == 400
    assert response.json()["error"].startswith("No API key configured")


async def seed_conversations(server: RunningServer, user: AppUser, n: int) -> list[str]:
    """`n` conversations, newest first in the returned order; pairs share a timestamp, so
    the order within a tie (by id) is exercised too."""
    start = utcnow()
    rows = [
        ConversationRow(
            user_id=user.id, title=f"c{i}", created_at=start + timedelta(seconds=i // 2)
        )
        for i in range(n)
    ]
    async with writing(server.db) as db:
        db.add_all(rows)
    ordered = sorted(rows, key=lambda row: (row.created_at, row.id), reverse=True)
    return [row.id for row in ordered]


async def pages(client: httpx.AsyncClient, user: AppUser, limit: int) -> list[list[str]]:
    result: list[list[str]] = []
    cursor: str | None = None
    while True:
        params: dict[str, Any] = {"limit": limit, **({"cursor": cursor} if cursor else {})}
        response = await client.get(CONVERSATIONS, params=params, headers=user.headers)
        assert response.status_code == 200
        body = response.json()
        result.append([item["id"] for item in body["conversations"]])
        cursor = body["nextCursor"]
        if cursor is None:
            return result


async def test_the_conversation_list_pages_with_a_cursor(
    client: httpx.AsyncClient, server: RunningServer, user: AppUser
) -> None:
    expected = await seed_conversations(server, user, 7)
    got = await pages(client, user, 3)
    assert [len(page) for page in got] == [3, 3, 1]
    assert [item for page in got for item in page] == expected
    assert await pages(client, user, 7) == [expected]  # exactly one page: nextCursor null


async def test_the_cursor_is_stable_while_the_list_changes(
    client: httpx.AsyncClient, server: RunningServer, user: AppUser
) -> None:
    expected = await seed_conversations(server, user, 6)
    first = (await client.get(CONVERSATIONS, params={"limit": 2}, headers=user.headers)).json()
    assert [c["id"] for c in first["conversations"]] == expected[:2]
    # A new conversation and a deleted one between the pages: the next page neither repeats
    # nor skips anything that was there.
    await seed_conversations(server, user, 1)
    deleted = await client.delete(f"{CONVERSATIONS}/{expected[0]}", headers=user.headers)
    assert deleted.status_code == 200
    params = {"limit": 2, "cursor": first["nextCursor"]}
    second = (await client.get(CONVERSATIONS, params=params, headers=user.headers)).json()
    assert [c["id"] for c in second["conversations"]] == expected[2:4]


async def test_the_default_page_is_50_and_the_largest_200(
    client: httpx.AsyncClient, server: RunningServer, user: AppUser
) -> None:
    expected = await seed_conversations(server, user, 201)
    default = (await client.get(CONVERSATIONS, headers=user.headers)).json()
    assert [c["id"] for c in default["conversations"]] == expected[:50]
    assert default["nextCursor"] is not None
    largest = await client.get(CONVERSATIONS, params={"limit": 200}, headers=user.headers)
    assert len(largest.json()["conversations"]) == 200


@pytest.mark.parametrize(
    ("params", "error"),
    [
        ({"limit": "0"}, INVALID),
        ({"limit": "201"}, INVALID),
        ({"limit": "ten"}, INVALID),
        ({"cursor": "not a cursor"}, {"error": "Invalid cursor"}),
        ({"cursor": "WyJ4IiwxXQ"}, {"error": "Invalid cursor"}),  # valid base64 JSON, wrong shape
        ({"cursor": "x" * 501}, INVALID),
    ],
)
async def test_bad_paging_parameters_are_400(
    client: httpx.AsyncClient, user: AppUser, params: dict[str, str], error: dict[str, str]
) -> None:
    response = await client.get(CONVERSATIONS, params=params, headers=user.headers)
    answer = response.json()
    # A query parameter's validation failure names it in `details`, like every other one.
    assert (response.status_code, answer.pop("details", None) is not None) == (
        400,
        error == INVALID,
    )
    assert answer == error


async def test_another_users_conversations_never_appear(
    client: httpx.AsyncClient, server: RunningServer, users: UserFactory
) -> None:
    owner, other = await users.create(), await users.create()
    await seed_conversations(server, owner, 3)
    body = (await client.get(CONVERSATIONS, headers=other.headers)).json()
    assert body == {"conversations": [], "nextCursor": None}
