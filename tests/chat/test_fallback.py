"""Provider fallback: an error left after the SDK's retries (429, 5xx, timeout)
moves that step to the other provider when the policy allows it and its key is set."""

from __future__ import annotations

import httpx
import pytest

from tests.chat.helpers import stream_chat, types
from tests.conftest import AppUser, RunningServer, UserFactory
from tests.fakes.llm import ErrorReply, FakeAnthropic, FakeOpenAI, Reply

POLICY = "/api/v1/admin/chat-policy"


async def set_fallback(client: httpx.AsyncClient, users: UserFactory, on: bool) -> None:
    boss = await users.create("super_admin")
    answer = await client.put(POLICY, json={"fallback": on}, headers=boss.headers)
    assert answer.status_code == 200


@pytest.mark.parametrize(
    ("status", "first"),
    [(529, "provider_a"), (500, "provider_a"), (429, "provider_b"), (503, "provider_b")],
)
async def test_the_other_provider_finishes_the_answer(
    client: httpx.AsyncClient,
    users: UserFactory,
    both_keys: AppUser,
    fake_anthropic: FakeAnthropic,
    fake_openai: FakeOpenAI,
    status: int,
    first: str,
) -> None:
    await set_fallback(client, users, True)
    failing, other = (
        (fake_anthropic, fake_openai) if first == "provider_a" else (fake_openai, fake_anthropic)
    )
    failing.script(ErrorReply(status, "Overloaded"))
    other.script(Reply(text="Answered by the other one."))
    _, events = await stream_chat(client, both_keys, {"message": "hi", "provider": first})
    assert types(events) == [
        "message_start",
        "provider_fallback",
        "content_delta",
        "message_complete",
    ]
    to = "provider_b" if first == "provider_a" else "provider_a"
    assert events[1] == {"type": "provider_fallback", "from": first, "to": to}
    assert events[-1]["message"]["content"] == "Answered by the other one."
    assert len(failing.requests) == 1 and len(other.requests) == 1
    assert fake_anthropic.invalid == [] and fake_openai.invalid == []


async def test_no_fallback_without_the_policy_for_other_errors_or_without_the_key(
    client: httpx.AsyncClient,
    server: RunningServer,
    users: UserFactory,
    both_keys: AppUser,
    fake_anthropic: FakeAnthropic,
    fake_openai: FakeOpenAI,
) -> None:
    body = {"message": "hi", "provider": "provider_a"}
    fake_anthropic.script(ErrorReply(529, "Overloaded"))
    _, events = await stream_chat(client, both_keys, body)  # the policy is off by default
    assert types(events) == ["message_start", "error"]
    assert events[-1] == {"type": "error", "error": "Overloaded", "code": "529"}

    await set_fallback(client, users, True)
    fake_anthropic.script(ErrorReply(400, "messages: bad"))  # the request's own fault
    _, events = await stream_chat(client, both_keys, body)
    assert types(events) == ["message_start", "error"]
    assert events[-1]["code"] == "400"

    boss = await users.create("super_admin")  # provider_b's key removed: nowhere to go
    removed = await client.delete("/api/v1/admin/settings/providerBApiKey", headers=boss.headers)
    assert removed.status_code == 200
    fake_anthropic.script(ErrorReply(500, "Internal server error"))
    _, events = await stream_chat(client, both_keys, body)
    assert types(events) == ["message_start", "error"]
    assert fake_openai.requests == []
    fake_anthropic.invalid.clear()
