"""A chat whose process died at any moment of its answer is closed by another process, or by
the next one to start: saved with what it had and `interrupted: true`, its event stream ended
by the interrupted error, and a stop then answered `Not running`."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
from contextlib import AbstractContextManager, suppress
from pathlib import Path

import httpx
import pytest
from sqlalchemy import select

from controlcenter.app import create_app
from controlcenter.chat.events import parsed
from controlcenter.chat.fold import fold
from controlcenter.chat.models import INTERRUPTED, RUNNING, ChatRun, Message, RunningMessage
from controlcenter.chat.run.stored import events_after
from tests.chat.helpers import set_settings, stored_messages
from tests.conftest import AppUser, RunningServer, UserFactory
from tests.dbtools import reading
from tests.fakes.llm import FakeAnthropic, Reply, ToolUse
from tests.fakes.server import LoopbackServer
from tests.outbox.conftest import wait_for
from tests.serve_process import serve_process, serving

# The processes' liveness interval: an answer is closed once its heartbeat is 3 intervals old.
# Short for a quick test, and long enough that a heartbeat a loaded machine writes late is not
# taken for a dead process's (the survivor would close the answer before the kill).
INTERVAL_S = 1.0
CHAT = "/api/v1/control-center/chat"


def serve(
    server: RunningServer, fake: FakeAnthropic, log: Path
) -> AbstractContextManager[tuple[str, subprocess.Popen[bytes]]]:
    env = {"PROVIDER_A_BASE_URL": fake.url, "CHAT_LIVENESS_INTERVAL_S": str(INTERVAL_S)}
    return serve_process(server, log, env)


async def chat_until_held(url: str, user: AppUser, fake: FakeAnthropic) -> str:
    """Start a chat whose second provider call never answers; its conversation id once the
    first step's text and tool result are saved as the running answer."""
    fake.script(
        Reply(text="Part one.", tool_uses=[ToolUse("nope", {"q": "x"}, id="toolu_1")]),
        Reply(text="never", delay_s=60),
    )
    events: list[dict[str, object]] = []

    async def read() -> None:
        async with (
            httpx.AsyncClient(timeout=120) as http,
            http.stream(
                "POST", url + CHAT, json={"message": "Hi"}, headers=user.headers
            ) as response,
        ):
            async for line in response.aiter_lines():
                if line.startswith("data: "):
                    events.append(json.loads(line[6:]))

    reader = asyncio.create_task(read())
    await wait_for(lambda: any(e["type"] == "tool_result" for e in events), within=30)
    conversation_id = str(events[0]["conversationId"])
    reader.cancel()
    return conversation_id


async def running_content(server: RunningServer) -> list[str]:
    """The text of each answer in flight whose stored events hold a tool's result: what a
    process that dies now leaves of it."""
    async with reading(server.db) as db:
        running = list(await db.scalars(select(RunningMessage.message_id)))
    answers = [
        fold(parsed(data) for _, data in await events_after(server.db, message_id, 0))
        for message_id in running
    ]
    return [answer.content for answer in answers if answer.tool_results]


async def assert_closed(
    server: RunningServer, conversation_id: str, user: AppUser, url: str
) -> None:
    async def closed() -> bool:
        return len(await stored_messages(server, conversation_id)) == 2

    await wait_for(closed, within=30)  # closed within 30 s
    async with httpx.AsyncClient() as http:
        answer = await http.get(
            f"{url}/api/v1/control-center/conversations/{conversation_id}", headers=user.headers
        )
    [_, message] = answer.json()["conversation"]["messages"]
    assert message["role"] == "assistant"
    assert message["interrupted"] is True
    assert message["content"] == "Part one."
    assert message["toolCalls"] == [{"id": "toolu_1", "name": "nope", "arguments": {"q": "x"}}]
    assert message["toolResults"] == [
        {"toolCallId": "toolu_1", "success": False, "error": "Unknown tool: nope"}
    ]
    assert await running_content(server) == []


async def test_killed_mid_answer_closed_by_the_survivor_then_by_the_next_start(
    server: RunningServer, users: UserFactory, fake_anthropic: FakeAnthropic, tmp_path: Path
) -> None:
    user = await users.create()
    await set_settings(server, {"providerAApiKey": fake_anthropic.api_key}, user)
    log = tmp_path / "serve.log"
    with (
        serve(server, fake_anthropic, log) as (url, first),
        serve(server, fake_anthropic, log) as (survivor_url, survivor),
    ):
        await asyncio.gather(serving(url, first, log), serving(survivor_url, survivor, log))
        # Two processes: the survivor closes the answer of the one killed mid-answer.
        conversation_id = await chat_until_held(url, user, fake_anthropic)
        await wait_for(lambda: _saved(server), within=30)
        first.send_signal(signal.SIGKILL)
        first.wait(10)
        await assert_closed(server, conversation_id, user, survivor_url)

        # One process: killed mid-answer, its answer is closed when it starts again.
        conversation_id = await chat_until_held(survivor_url, user, fake_anthropic)
        await wait_for(lambda: _saved(server), within=30)
        survivor.send_signal(signal.SIGKILL)
        survivor.wait(10)
    assert len(await stored_messages(server, conversation_id)) == 1  # nobody closed it yet
    # The next start (here an app in this process: the same lifespan, without a cold start).
    config = server.config.model_copy(update={"chat_liveness_interval_s": INTERVAL_S})
    restarted = LoopbackServer(create_app(config)).start()
    try:
        await assert_closed(server, conversation_id, user, restarted.url)
    finally:
        restarted.stop()


async def _saved(server: RunningServer) -> bool:
    return await running_content(server) == ["Part one."]


CHATS = 20
MID_ANSWER = "mid-answer"


def _held_answers(body: dict[str, object]) -> Reply:
    """Every chat's first step says something and calls a tool; its second never answers."""
    if "tool_result" in json.dumps(body["messages"]):
        return Reply(text="never", delay_s=120)
    return Reply(text="Part one.", tool_uses=[ToolUse("nope", {"q": "x"}, id="toolu_1")])


async def _runs_of(server: RunningServer, user: AppUser) -> list[ChatRun]:
    async with reading(server.db) as db:
        return list(await db.scalars(select(ChatRun).where(ChatRun.user_id == user.id)))


@pytest.mark.parametrize("killed_at", [0.2, 0.7, MID_ANSWER])
async def test_every_chat_of_a_killed_process_group_ends_as_interrupted(
    server: RunningServer,
    users: UserFactory,
    fake_anthropic: FakeAnthropic,
    tmp_path: Path,
    killed_at: float | str,
) -> None:
    """Twenty chats, the serve process group killed (SIGKILL) about `killed_at` seconds after
    the first of them is stored, or once every one is mid-answer: each run stored is closed
    at the next start, its events endpoint ends with the interrupted error, a stop is refused
    as `Not running`, and the answer keeps what its process had saved."""
    user = await users.create()
    await set_settings(server, {"providerAApiKey": fake_anthropic.api_key}, user)
    fake_anthropic.responder = _held_answers
    log = tmp_path / "serve.log"
    seen: list[list[dict[str, object]]] = [[] for _ in range(CHATS)]

    async def chat(url: str, events: list[dict[str, object]]) -> None:
        with suppress(httpx.HTTPError):
            async with (
                httpx.AsyncClient(timeout=120) as http,
                http.stream(
                    "POST", url + CHAT + "?ids=1", json={"message": "Hi"}, headers=user.headers
                ) as response,
            ):
                async for line in response.aiter_lines():
                    if line.startswith("data: "):
                        events.append(json.loads(line[6:]))

    with serve(server, fake_anthropic, log) as (url, process):
        await serving(url, process, log)
        readers = [asyncio.create_task(chat(url, events)) for events in seen]
        try:
            if killed_at == MID_ANSWER:

                async def all_saved() -> bool:
                    return await running_content(server) == ["Part one."] * CHATS

                await wait_for(all_saved, within=60)
            else:

                async def one_stored() -> bool:
                    return bool(await _runs_of(server, user))

                await wait_for(one_stored, within=60)
                await asyncio.sleep(float(killed_at))
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)
        finally:
            await asyncio.gather(*readers)
    runs = await _runs_of(server, user)
    assert runs, "no chat was stored before the kill"
    assert {run.status for run in runs} == {RUNNING}  # none ended before the kill
    if killed_at == MID_ANSWER:
        assert len(runs) == CHATS

    config = server.config.model_copy(update={"chat_liveness_interval_s": INTERVAL_S})
    restarted = LoopbackServer(create_app(config)).start()
    try:

        async def all_closed() -> bool:
            return all(run.status == INTERRUPTED for run in await _runs_of(server, user))

        await wait_for(all_closed, within=30)
        async with httpx.AsyncClient(base_url=restarted.url, timeout=30) as http:
            for run in runs:
                events_url = f"{CHAT}/{run.message_id}/events"
                lines = (await http.get(events_url, headers=user.headers)).text.splitlines()
                data = [json.loads(line[6:]) for line in lines if line.startswith("data: ")]
                assert data[0]["type"] == "message_start"
                assert data[-1] == {"type": "error", "error": "The answer was interrupted"}
                stop = await http.post(f"{CHAT}/{run.message_id}/stop", headers=user.headers)
                assert (stop.status_code, stop.json()) == (409, {"error": "Not running"})
    finally:
        restarted.stop()
    assert await running_content(server) == []
    async with reading(server.db) as db:
        answers = list(
            await db.scalars(select(Message).where(Message.id.in_([r.message_id for r in runs])))
        )
    assert len(answers) == len(runs)
    assert all(answer.interrupted for answer in answers)
    if killed_at == MID_ANSWER:
        assert {answer.content for answer in answers} == {"Part one."}
