"""Stopping a message: nothing starts after the stop, a tool call under way
finishes, the message is saved with what exists and `message_complete` says `stopped`."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
from httpx_sse import aconnect_sse
from structlog.testing import capture_logs

from controlcenter.tools.base import Tool, ToolContext
from tests.chat.helpers import CHAT, Llm, stored_messages, stream_chat, types, wait_for
from tests.chat.test_resume import Frame, events_url, read_frames
from tests.conftest import AppUser, RunningServer, UserFactory
from tests.fakes.llm import Reply, ToolUse

CONVERSATIONS = "/api/v1/control-center/conversations"


def stop_url(message_id: str) -> str:
    return f"{CHAT}/{message_id}/stop"


async def test_a_stop_while_the_provider_thinks_ends_the_message_at_once(
    client: httpx.AsyncClient, server: RunningServer, llm: Llm, user: AppUser
) -> None:
    llm.fake.script(Reply(text="never shown", delay_s=30))  # the provider holds its answer
    body = {"message": "hi", "provider": llm.name}
    first = await read_frames(client, "POST", f"{CHAT}?ids=1", user, body=body, stop_after=1)
    message_id = first[0][1]["messageId"]
    conversation_id = first[0][1]["conversationId"]
    await wait_for(lambda: _true(len(llm.fake.requests) == 1))
    response = await client.post(stop_url(message_id), headers=user.headers)
    assert (response.status_code, response.json()) == (200, {"success": True})
    rest = await read_frames(
        client, "GET", events_url(message_id), user, headers={"Last-Event-ID": first[0][0]}
    )
    complete = rest[-1][1]
    assert complete["type"] == "message_complete" and complete["stopped"] is True
    stored = await stored_messages(server, conversation_id)
    assert stored[-1].id == message_id and stored[-1].role == "assistant"
    assert stored[-1].content == complete["message"]["content"] == ""
    response = await client.post(stop_url(message_id), headers=user.headers)
    assert (response.status_code, response.json()) == (409, {"error": "Not running"})


async def test_a_stop_during_a_tool_call_lets_it_finish_and_starts_nothing_after(
    client: httpx.AsyncClient,
    server: RunningServer,
    llm: Llm,
    user: AppUser,
    register_tools: Any,
) -> None:
    started = asyncio.Event()
    release = asyncio.Event()
    calls: list[str] = []

    async def slow(arguments: dict[str, Any], context: ToolContext) -> Any:
        calls.append(str(arguments.get("q")))
        started.set()
        await release.wait()
        return {"found": arguments.get("q")}

    register_tools(
        [
            Tool(
                name="contact_search",
                description="Search contacts.",
                input_schema={"type": "object", "properties": {"q": {"type": "string"}}},
                handler=slow,
            )
        ]
    )
    llm.fake.script(
        Reply(
            text="Searching.",
            tool_uses=[
                ToolUse("contact_search", {"q": "one"}, id="call_1"),
                ToolUse("contact_search", {"q": "two"}, id="call_2"),
            ],
        ),
        Reply(text="unused"),
    )
    body = {"message": "find", "provider": llm.name}
    first = await read_frames(client, "POST", f"{CHAT}?ids=1", user, body=body, stop_after=1)
    message_id = first[0][1]["messageId"]
    await asyncio.wait_for(started.wait(), 10)
    response = await client.post(stop_url(message_id), headers=user.headers)
    assert response.status_code == 200
    release.set()
    rest = await read_frames(client, "GET", f"{events_url(message_id)}?after=1", user)
    assert types([e for _, e in rest]) == [
        "content_delta",
        "tool_call_start",
        "tool_result",
        "message_complete",
    ]
    assert rest[2][1]["toolResult"]["success"] is True  # the call under way finished
    assert calls == ["one"]  # the second call never started
    assert len(llm.fake.requests) == 1  # nor did a provider call
    final = rest[-1][1]
    assert final["stopped"] is True
    assert final["message"]["content"] == "Searching."
    assert [c["id"] for c in final["message"]["toolCalls"]] == ["call_1"]
    stored = await stored_messages(server, first[0][1]["conversationId"])
    assert stored[-1].tool_results is not None and len(stored[-1].tool_results) == 1


async def test_stop_answers_404_to_others_and_409_once_finished(
    client: httpx.AsyncClient, llm: Llm, user: AppUser, users: UserFactory
) -> None:
    llm.fake.script(Reply(text="Hello"))
    _, events = await stream_chat(client, user, {"message": "hi", "provider": llm.name})
    assert "stopped" not in events[-1]  # a message that was not stopped has no `stopped` key
    message_id = events[0]["messageId"]
    other = await users.create()
    response = await client.post(stop_url(message_id), headers=other.headers)
    assert (response.status_code, response.json()) == (404, {"error": "Message not found"})
    response = await client.post(stop_url("msg_0_nothing"), headers=user.headers)
    assert response.status_code == 404

    async def finished() -> bool:
        answer = await client.post(stop_url(message_id), headers=user.headers)
        return answer.status_code == 409

    await wait_for(finished)
    response = await client.post(stop_url(message_id), headers=user.headers)
    assert response.json() == {"error": "Not running"}
    assert (await client.post(stop_url(message_id))).status_code == 401


async def test_deleting_the_conversation_stops_its_running_answer(
    client: httpx.AsyncClient, server: RunningServer, llm: Llm, user: AppUser
) -> None:
    """The run stops as a stop would (no further provider call), its live stream and its
    stored one end with a plain error event, and nothing is logged as an error.

    The provider streams its answer a word at a time, so its call never sits silent for the
    client's timeout however slow the machine: the deletion lands while the answer streams
    (its first word seen on the live stream), whenever that is."""
    streaming = Reply(text="never shown " * 300, chunk_delay_s=0.2)
    llm.fake.script(streaming, Reply(text="unused"))
    body = {"message": "hi", "provider": llm.name}
    with capture_logs() as logs:
        live: list[Frame] = []
        answering = asyncio.Event()

        async def read_live() -> None:
            url = f"{CHAT}?ids=1&deltas=tokens"
            async with aconnect_sse(client, "POST", url, json=body, headers=user.headers) as sse:
                async for event in sse.aiter_sse():
                    live.append((event.id, json.loads(event.data)))
                    if live[-1][1]["type"] == "content_delta":
                        answering.set()

        reader = asyncio.create_task(read_live())
        answered = asyncio.create_task(answering.wait())
        await asyncio.wait({reader, answered}, return_when=asyncio.FIRST_COMPLETED)
        assert answering.is_set(), live  # the stream did not end before the answer began
        message_id = live[0][1]["messageId"]
        conversation_id = live[0][1]["conversationId"]
        deleted = await client.delete(f"{CONVERSATIONS}/{conversation_id}", headers=user.headers)
        assert (deleted.status_code, deleted.json()) == (200, {"success": True})
        await reader
        stored = await read_frames(client, "GET", events_url(message_id), user)
    gone = {"type": "error", "error": "The conversation was deleted"}
    assert live[-1][1] == gone
    assert stored[-1][1] == gone
    assert [n for n, _ in stored] == [n for n, _ in live]
    assert len(llm.fake.requests) == 1
    assert await stored_messages(server, conversation_id) == []
    response = await client.post(stop_url(message_id), headers=user.headers)
    assert (response.status_code, response.json()) == (409, {"error": "Not running"})
    assert [entry for entry in logs if entry["log_level"] in ("error", "critical")] == []


async def _true(value: bool) -> bool:
    return value
