"""`PUT /api/v1/admin/chat-policy` merges its fields with the stored policy inside its write,
not with what the process keeps in memory, so another process's change is never undone."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
from sqlalchemy import text

from controlcenter.chat.policy import CHAT_POLICY
from tests.conftest import AppUser, RunningServer, UserFactory
from tests.dbtools import writing

POLICY = "/api/v1/admin/chat-policy"
DEFAULTS: dict[str, Any] = {
    "toolApproval": "off",
    "monthlyTokenQuota": None,
    "fallback": False,
    "contextTokenBudget": 100000,
}


async def _policy(client: httpx.AsyncClient, boss: AppUser) -> dict[str, Any]:
    got = await client.get(POLICY, headers=boss.headers)
    assert got.status_code == 200
    policy: dict[str, Any] = got.json()["policy"]
    return policy


async def test_a_put_keeps_a_change_its_process_has_not_seen(
    client: httpx.AsyncClient, server: RunningServer, users: UserFactory
) -> None:
    boss = await users.create("super_admin")
    put = await client.put(POLICY, json={"monthlyTokenQuota": 5000}, headers=boss.headers)
    assert put.status_code == 200
    assert await _policy(client, boss) == {**DEFAULTS, "monthlyTokenQuota": 5000}  # now kept

    # Another instance's PUT, committed where this process's kept values do not see it.
    other = {**DEFAULTS, "monthlyTokenQuota": 5000, "fallback": True}
    async with writing(server.db) as session:
        await session.execute(
            text("UPDATE settings SET value_encrypted = :value WHERE name = :name"),
            {"value": server.settings.cipher.encrypt(json.dumps(other)), "name": CHAT_POLICY},
        )
    assert (await _policy(client, boss))["fallback"] is False  # the kept policy lags

    put = await client.put(POLICY, json={"toolApproval": "writes"}, headers=boss.headers)

    both = {**other, "toolApproval": "writes"}
    assert (put.status_code, put.json()) == (200, {"policy": both})
    assert await _policy(client, boss) == both


async def test_puts_of_different_fields_at_once_all_stand(
    client: httpx.AsyncClient, users: UserFactory
) -> None:
    boss = await users.create("super_admin")
    await _policy(client, boss)  # the unset policy kept, as every PUT below will read first
    changes: list[dict[str, Any]] = [
        {"toolApproval": "writes"},
        {"monthlyTokenQuota": 7},
        {"fallback": True},
        {"contextTokenBudget": 2000},
    ]

    answers = await asyncio.gather(
        *(client.put(POLICY, json=change, headers=boss.headers) for change in changes)
    )

    assert [answer.status_code for answer in answers] == [200] * len(changes)
    everything = {key: value for change in changes for key, value in change.items()}
    assert await _policy(client, boss) == everything
