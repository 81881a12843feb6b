"""A conversation deleted while its answer ends: both writers take the conversation's rows in
one order, so neither waits on the other in a circle. The deletion answers 200, the answer
simply ends (saved before the deletion, or closed as deleted), and no run is stored failed."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

import httpx
import pytest
from httpx_sse import aconnect_sse
from sqlalchemy import select

from controlcenter.chat.models import ChatRun
from tests.chat.helpers import CHAT, CONVERSATIONS, Llm, set_settings
from tests.conftest import AppUser, RunningServer, UserFactory
from tests.dbtools import reading
from tests.fakes.llm import Reply

RACES = 200
AT_ONCE = 20  # chats racing their deletion together
DELETED = "The conversation was deleted"


@pytest.mark.postgresql_only
async def test_deletions_racing_their_answers_ends_neither_fail_nor_lose_an_answer(
    client: httpx.AsyncClient, server: RunningServer, llm: Llm, users: UserFactory
) -> None:
    user = await users.create()
    await set_settings(server, {llm.setting: llm.fake.api_key}, user)
    # Each reply is held until the test lets one go, as it sends a deletion.
    permits = threading.Semaphore(0)

    async def held(_: float) -> None:
        await asyncio.to_thread(permits.acquire)

    llm.fake.sleep = held
    llm.fake.responder = lambda _: Reply(text="The answer", delay_s=1.0)

    async def race(
        chat: asyncio.Task[list[dict[str, Any]]], conversation: asyncio.Future[str]
    ) -> tuple[int, list[dict[str, Any]]]:
        conversation_id = await conversation
        permits.release()
        deleted = await client.delete(f"{CONVERSATIONS}/{conversation_id}", headers=user.headers)
        return deleted.status_code, await chat

    outcomes: list[tuple[int, list[dict[str, Any]]]] = []
    for _ in range(RACES // AT_ONCE):
        loop = asyncio.get_running_loop()
        conversations = [loop.create_future() for _ in range(AT_ONCE)]
        chats = [asyncio.create_task(_chat(client, user, llm, c)) for c in conversations]
        await asyncio.gather(*conversations)
        outcomes += await asyncio.gather(
            *(race(chat, c) for chat, c in zip(chats, conversations, strict=True))
        )
    assert [status for status, _ in outcomes] == [200] * RACES
    endings = [events[-1] for _, events in outcomes]
    assert {ending["type"] for ending in endings} <= {"message_complete", "error"}
    assert {ending["error"] for ending in endings if ending["type"] == "error"} <= {DELETED}
    message_ids = [events[0]["messageId"] for _, events in outcomes]
    async with reading(server.db) as session:
        rows = await session.execute(
            select(ChatRun.message_id, ChatRun.status).where(ChatRun.message_id.in_(message_ids))
        )
        statuses = {message_id: status for message_id, status in rows}
    assert set(statuses.values()) <= {"done", "stopped"}
    # An answer that found its conversation gone ends stopped, its deletion having stopped it.
    for message_id, ending in zip(message_ids, endings, strict=True):
        if ending["type"] == "error":
            assert statuses[message_id] == "stopped"


async def _chat(
    client: httpx.AsyncClient, user: AppUser, llm: Llm, conversation: asyncio.Future[str]
) -> list[dict[str, Any]]:
    """The chat's events, read to the end; `conversation` its id, from `message_start`."""
    body = {"message": "hi", "provider": llm.name}
    events: list[dict[str, Any]] = []
    async with aconnect_sse(client, "POST", CHAT, json=body, headers=user.headers) as source:
        async for sse in source.aiter_sse():
            events.append(json.loads(sse.data))
            if events[-1]["type"] == "message_start":
                conversation.set_result(events[-1]["conversationId"])
    return events
