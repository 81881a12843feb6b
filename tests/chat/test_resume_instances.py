"""Resume across instances: two `controlcenter serve` processes on one database
(PostgreSQL under scripts/with-postgres.sh: LISTEN/NOTIFY; SQLite otherwise: one file, polled).
A chat starts on one, the client's connection is cut, the client resumes on the other and gets
every event exactly once and in order; a stop sent to the other instance stops it."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from tests.chat.helpers import CHAT, set_settings, types
from tests.chat.test_resume import events_url, read_frames
from tests.conftest import AppUser, RunningServer, UserFactory
from tests.fakes.llm import FakeAnthropic, Reply, ToolUse
from tests.serve_process import serve_process, serving


@pytest.fixture(scope="module")
async def instances(
    server: RunningServer, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[tuple[str, str]]:
    log = tmp_path_factory.mktemp("instances") / "serve.log"
    config = server.config
    env = {
        "PROVIDER_A_BASE_URL": config.provider_a_base_url,
        "PROVIDER_B_BASE_URL": config.provider_b_base_url,
        "CRM_BASE_URL": config.crm_base_url,
        "LOG_FORMAT": "json",
        # An approval answer that is never heard ends as a denial in this time, not in 10 min.
        "CHAT_APPROVAL_TIMEOUT_S": "20",
    }
    with (
        serve_process(server, log, env) as (first, first_process),
        serve_process(server, log, env) as (second, second_process),
    ):
        await asyncio.gather(
            serving(first, first_process, log), serving(second, second_process, log)
        )
        yield first, second


@pytest.fixture
async def broker(
    server: RunningServer, users: UserFactory, fake_anthropic: FakeAnthropic
) -> AppUser:
    created = await users.create()
    await set_settings(server, {"providerAApiKey": fake_anthropic.api_key}, created)
    return created


async def test_a_chat_started_on_one_instance_resumes_on_the_other(
    instances: tuple[str, str], broker: AppUser, fake_anthropic: FakeAnthropic
) -> None:
    first, second = instances
    # No tools in the subprocesses but the CRM catalogue: an unknown name still gives a
    # tool_call_start and a failed tool_result, then the provider holds its answer.
    fake_anthropic.script(
        Reply(text="Looking.", tool_uses=[ToolUse("no_such_tool", {}, id="toolu_1")]),
        Reply(text=" Done.", delay_s=1.5),
    )
    body = {"message": "hello", "provider": "provider_a"}
    async with httpx.AsyncClient(base_url=first, timeout=30) as one:
        cut = await read_frames(one, "POST", f"{CHAT}?ids=1", broker, body=body, stop_after=2)
    message_id = cut[0][1]["messageId"]
    async with httpx.AsyncClient(base_url=second, timeout=30) as other:
        rest = await read_frames(
            other, "GET", events_url(message_id), broker, headers={"Last-Event-ID": cut[-1][0]}
        )
        replay = await read_frames(other, "GET", events_url(message_id), broker)
    got = cut + rest
    assert [frame_id for frame_id, _ in got] == [f"{message_id}:{n}" for n in range(1, 7)]
    assert types([e for _, e in got]) == [
        "message_start",
        "content_delta",
        "tool_call_start",
        "tool_result",
        "content_delta",
        "message_complete",
    ]
    assert got[-1][1]["message"]["content"] == "Looking. Done."
    assert replay == got
    assert fake_anthropic.invalid == []


async def test_a_stop_sent_to_the_other_instance_stops_the_chat(
    instances: tuple[str, str], broker: AppUser, fake_anthropic: FakeAnthropic
) -> None:
    first, second = instances
    fake_anthropic.script(Reply(text="never shown", delay_s=30))
    body = {"message": "hello", "provider": "provider_a"}
    frames: list[dict[str, Any]] = []
    async with (
        httpx.AsyncClient(base_url=first, timeout=30) as one,
        httpx.AsyncClient(base_url=second, timeout=30) as other,
        one.stream("POST", f"{CHAT}?ids=1", json=body, headers=broker.headers) as live,
    ):
        async for line in live.aiter_lines():
            if line.startswith("data: "):
                frames.append(json.loads(line[6:]))
                if len(frames) == 1:
                    stop = f"{CHAT}/{frames[0]['messageId']}/stop"
                    answer = await other.post(stop, headers=broker.headers)
                    assert answer.status_code == 200, answer.text
    assert types(frames) == ["message_start", "message_complete"]
    assert frames[-1]["stopped"] is True
    assert frames[-1]["message"]["content"] == ""


CROSS_ROUNDS = 10


async def test_an_approval_sent_to_the_other_instance_the_moment_it_is_asked_runs_the_call(
    instances: tuple[str, str],
    server: RunningServer,
    users: UserFactory,
    broker: AppUser,
    fake_anthropic: FakeAnthropic,
) -> None:
    """The worst moment for the wait that runs on the first instance: the answer is sent to
    the second as soon as `tool_approval_required` is read. Every answer is taken (200) and
    the call runs (the CRM refuses it: no agency credential); an answer the chat never
    heard would end as "Denied by the user" when the wait times out."""
    first, second = instances
    boss = await users.create("super_admin")
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as own:
        policy = {"toolApproval": "writes"}
        answer = await own.put("/api/v1/admin/chat-policy", json=policy, headers=boss.headers)
        assert answer.status_code == 200
    body = {"message": "tag", "provider": "provider_a"}
    async with (
        httpx.AsyncClient(base_url=first, timeout=30) as one,
        httpx.AsyncClient(base_url=second, timeout=30) as other,
    ):
        for n in range(CROSS_ROUNDS):
            call = ToolUse("contacts_add-tags", {"contactId": "c1", "tags": ["vip"]}, id=f"t{n}")
            fake_anthropic.script(Reply(tool_uses=[call]), Reply(text="Done."))
            frames: list[dict[str, Any]] = []
            async with one.stream("POST", CHAT, json=body, headers=broker.headers) as live:
                async for line in live.aiter_lines():
                    if not line.startswith("data: "):
                        continue
                    frames.append(json.loads(line[6:]))
                    if frames[-1]["type"] == "tool_approval_required":
                        path = f"{CHAT}/{frames[0]['messageId']}/tool-calls/t{n}/approve"
                        answer = await other.post(path, headers=broker.headers)
                        assert (n, answer.status_code) == (n, 200), answer.text
            results = [f["toolResult"] for f in frames if f["type"] == "tool_result"]
            assert len(results) == 1, frames
            assert results[0]["error"] != "Denied by the user", (n, results)
            assert frames[-1]["type"] == "message_complete"
