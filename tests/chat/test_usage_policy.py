"""Usage, the chat policy, the monthly quota and the usage report."""

from __future__ import annotations

from typing import Any

import httpx

from controlcenter.chat.models import DONE
from controlcenter.chat.run.stored import run_owner_status
from controlcenter.db import utcnow
from tests.chat.conftest import ToolLog, recording_tool
from tests.chat.helpers import (
    CHAT,
    CONVERSATIONS,
    Llm,
    count_rows,
    set_settings,
    stream_chat,
    wait_for,
)
from tests.conftest import AppUser, RunningServer, UserFactory
from tests.fakes.llm import FakeAnthropic, Reply, ToolUse

POLICY = "/api/v1/admin/chat-policy"
USAGE = "/api/v1/admin/usage"
DEFAULTS = {
    "toolApproval": "off",
    "monthlyTokenQuota": None,
    "fallback": False,
    "contextTokenBudget": 100000,
}


async def test_usage_adds_up_the_provider_calls_of_a_message(
    client: httpx.AsyncClient, llm: Llm, user: AppUser, register_tools: Any, tool_log: ToolLog
) -> None:
    register_tools([recording_tool("contact_search", tool_log)])
    llm.fake.script(
        Reply(text="Looking.", tool_uses=[ToolUse("contact_search", {"q": "a"})], usage=(100, 20)),
        Reply(text=" Done.", usage=(150, 30)),
    )
    _, events = await stream_chat(client, user, {"message": "find", "provider": llm.name})
    usage = {"inputTokens": 250, "outputTokens": 50, "providerCalls": 2}
    assert events[-1]["message"]["usage"] == usage
    conversation_id = events[0]["conversationId"]
    got = await client.get(f"{CONVERSATIONS}/{conversation_id}", headers=user.headers)
    user_message, answer = got.json()["conversation"]["messages"]
    assert "usage" not in user_message  # only assistant messages carry it
    assert answer["usage"] == usage


async def test_the_policy_is_read_and_changed_by_super_administrators_only(
    client: httpx.AsyncClient, users: UserFactory
) -> None:
    boss = await users.create("super_admin")
    got = await client.get(POLICY, headers=boss.headers)
    assert (got.status_code, got.json()) == (200, {"policy": DEFAULTS})
    put = await client.put(POLICY, json={"monthlyTokenQuota": 5000}, headers=boss.headers)
    assert put.json() == {"policy": {**DEFAULTS, "monthlyTokenQuota": 5000}}
    put = await client.put(
        POLICY, json={"toolApproval": "writes", "fallback": True}, headers=boss.headers
    )
    changed = {**DEFAULTS, "monthlyTokenQuota": 5000, "toolApproval": "writes", "fallback": True}
    assert put.json() == {"policy": changed}
    assert (await client.get(POLICY, headers=boss.headers)).json() == {"policy": changed}
    put = await client.put(POLICY, json={"monthlyTokenQuota": None}, headers=boss.headers)
    assert put.json()["policy"]["monthlyTokenQuota"] is None

    for wrong, field in (
        ({"toolApproval": "all"}, "toolApproval"),
        ({"toolApproval": None}, "toolApproval"),
        ({"monthlyTokenQuota": "5"}, "monthlyTokenQuota"),
        ({"monthlyTokenQuota": -1}, "monthlyTokenQuota"),
        ({"monthlyTokenQuota": True}, "monthlyTokenQuota"),
        ({"fallback": "yes"}, "fallback"),
        ({"contextTokenBudget": 10}, "contextTokenBudget"),
        ({"contextTokenBudget": 5000.5}, "contextTokenBudget"),
        ({"other": 1}, "other"),
    ):
        answer = await client.put(POLICY, json=wrong, headers=boss.headers)
        assert answer.status_code == 400, wrong
        body = answer.json()
        assert body["error"] == "Validation failed"
        assert body["details"][0]["path"][0] == field
    answer = await client.put(POLICY, json=[1], headers=boss.headers)
    assert answer.status_code == 400
    answer = await client.put(
        POLICY, content=b"{", headers={**boss.headers, "content-type": "application/json"}
    )
    assert (answer.status_code, answer.json()) == (400, {"error": "Invalid JSON body"})
    assert (await client.get(POLICY, headers=boss.headers)).json()["policy"]["fallback"] is True

    for role in ("admin", "user"):
        other = await users.create(role)
        assert (await client.get(POLICY, headers=other.headers)).status_code == 403
        put = await client.put(POLICY, json={"fallback": False}, headers=other.headers)
        assert put.status_code == 403
    # Not one of the 21 settings.
    settings = (await client.get("/api/v1/admin/settings", headers=boss.headers)).json()
    assert "chatPolicy" not in settings["settings"]


async def test_the_quota_refuses_before_the_stream_once_reached(
    client: httpx.AsyncClient,
    server: RunningServer,
    llm: Llm,
    user: AppUser,
    users: UserFactory,
    fake_anthropic: FakeAnthropic,
) -> None:
    boss = await users.create("super_admin")
    await client.put(POLICY, json={"monthlyTokenQuota": 100}, headers=boss.headers)
    llm.fake.script(Reply(text="One.", usage=(80, 30)))
    body = {"message": "hi", "provider": llm.name}
    _, events = await stream_chat(client, user, body)
    assert events[-1]["type"] == "message_complete"  # 0 used before: allowed

    async def counted() -> bool:  # the run's usage is stored as it ends, after its last event
        found = await run_owner_status(server.db, events[0]["messageId"])
        return found is not None and found[1] == DONE

    await wait_for(counted)
    before = await count_rows(server)
    answer = await client.post(CHAT, json=body, headers=user.headers)
    assert (answer.status_code, answer.json()) == (429, {"error": "Monthly token quota reached"})
    assert await count_rows(server) == before  # nothing saved, no provider call
    assert len(llm.fake.requests) == 1

    # Per user: another user still chats; a higher quota lets this one again.
    other = await users.create()
    await set_settings(server, {"providerAApiKey": fake_anthropic.api_key}, other)
    fake_anthropic.script(Reply(text="Hi."))
    _, events = await stream_chat(client, other, {"message": "hi"})
    assert events[-1]["type"] == "message_complete"
    await client.put(POLICY, json={"monthlyTokenQuota": 111}, headers=boss.headers)
    llm.fake.script(Reply(text="Two."))
    _, events = await stream_chat(client, user, body)
    assert events[-1]["type"] == "message_complete"


async def test_the_usage_report_per_user_and_month(
    client: httpx.AsyncClient,
    llm: Llm,
    user: AppUser,
    users: UserFactory,
    register_tools: Any,
    tool_log: ToolLog,
) -> None:
    register_tools([recording_tool("contact_search", tool_log)])
    llm.fake.script(
        Reply(
            tool_uses=[ToolUse("contact_search", {}), ToolUse("contact_search", {})], usage=(10, 1)
        ),
        Reply(text="a", usage=(20, 2)),
        Reply(text="b", usage=(30, 3)),
    )
    body = {"message": "hi", "provider": llm.name}
    await stream_chat(client, user, body)
    await stream_chat(client, user, body)
    admin = await users.create("admin")
    month = utcnow().strftime("%Y-%m")
    expected = {
        "month": month,
        "users": [
            {
                "userId": user.id,
                "email": user.email,
                "name": user.name,
                "inputTokens": 60,
                "outputTokens": 6,
                "chats": 2,
                "toolCalls": 2,
            }
        ],
    }

    async def reported() -> bool:
        got = await client.get(f"{USAGE}?month={month}", headers=admin.headers)
        return bool(got.json() == expected)

    await wait_for(reported)
    assert (await client.get(USAGE, headers=admin.headers)).json() == expected  # this month
    empty = await client.get(f"{USAGE}?month=2001-02", headers=admin.headers)
    assert empty.json() == {"month": "2001-02", "users": []}
    last = await client.get(f"{USAGE}?month=9999-12", headers=admin.headers)
    assert last.json() == {"month": "9999-12", "users": []}  # the calendar's last month
    for bad in ("2026-13", "2026-1", "november", "2026-11-01", "0000-01", "0999-05"):
        answer = await client.get(f"{USAGE}?month={bad}", headers=admin.headers)
        assert answer.status_code == 400
        assert answer.json()["error"] == "Validation failed" and answer.json()["details"]
    assert (await client.get(USAGE, headers=user.headers)).status_code == 403
    assert (await client.get(USAGE)).status_code == 403  # as every admin route
