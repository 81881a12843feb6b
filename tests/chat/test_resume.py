"""Event ids, stored events and resuming a message, over HTTP with the real SDKs
against the strict fakes, for both providers."""

from __future__ import annotations

import json
from typing import Any

import httpx
from httpx_sse import aconnect_sse
from sqlalchemy import update

from controlcenter.chat.models import DONE, ChatRun, Message
from controlcenter.chat.run.stored import KEPT_FOR, events_after, prune, run_owner_status
from controlcenter.db import utcnow
from tests.chat.conftest import ToolLog, recording_tool
from tests.chat.helpers import CHAT, Llm, stored_messages, stream_chat, types, wait_for
from tests.conftest import AppUser, RunningServer, UserFactory
from tests.dbtools import writing
from tests.fakes.llm import Reply, ToolUse

Frame = tuple[str, dict[str, Any]]  # (id, event)


def events_url(message_id: str) -> str:
    return f"{CHAT}/{message_id}/events"


async def read_frames(
    client: httpx.AsyncClient,
    method: str,
    url: str,
    user: AppUser,
    *,
    body: dict[str, Any] | None = None,
    headers: dict[str, str] | None = None,
    stop_after: int | None = None,
) -> list[Frame]:
    """The frames as a real SSE client reads them; with `stop_after`, the connection is cut
    after that many."""
    frames: list[Frame] = []
    all_headers = {**user.headers, **(headers or {})}
    async with aconnect_sse(client, method, url, json=body, headers=all_headers) as source:
        assert source.response.status_code == 200
        async for sse in source.aiter_sse():
            frames.append((sse.id, json.loads(sse.data)))
            if stop_after is not None and len(frames) == stop_after:
                break
    return frames


def tool_then_slow_answer(log: ToolLog, register_tools: Any) -> list[Reply]:
    register_tools([recording_tool("contact_search", log)])
    return [
        Reply(text="Looking.", tool_uses=[ToolUse("contact_search", {"q": "Smith"}, id="call_1")]),
        Reply(text=" Found Smith.", delay_s=0.5),
    ]


async def test_ids_number_every_frame_and_the_default_has_data_lines_only(
    client: httpx.AsyncClient, llm: Llm, user: AppUser
) -> None:
    llm.fake.script(Reply(text="Hello"))
    body = {"message": "hi", "provider": llm.name}
    async with client.stream("POST", f"{CHAT}?ids=1", json=body, headers=user.headers) as response:
        raw = b"".join([chunk async for chunk in response.aiter_bytes()]).decode()
    frames = raw.split("\n\n")[:-1]
    message_id = json.loads(frames[0].split("\n")[1][len("data: ") :])["messageId"]
    for n, frame in enumerate(frames, start=1):
        id_line, data_line = frame.split("\n")
        assert id_line == f"id: {message_id}:{n}"
        assert data_line.startswith("data: {")
    assert len(frames) == 3

    llm.fake.script(Reply(text="Hello"))  # without ?ids=1: data lines only
    async with client.stream("POST", CHAT, json=body, headers=user.headers) as response:
        raw = b"".join([chunk async for chunk in response.aiter_bytes()]).decode()
    assert all(f.startswith("data: ") and "\n" not in f for f in raw.split("\n\n")[:-1])


async def test_a_finished_message_replays_its_events_after_the_last_seen(
    client: httpx.AsyncClient, llm: Llm, user: AppUser, register_tools: Any, tool_log: ToolLog
) -> None:
    llm.fake.script(*tool_then_slow_answer(tool_log, register_tools))
    body = {"message": "find Smith", "provider": llm.name}
    live = await read_frames(client, "POST", f"{CHAT}?ids=1", user, body=body)
    assert types([e for _, e in live]) == [
        "message_start",
        "content_delta",
        "tool_call_start",
        "tool_result",
        "content_delta",
        "message_complete",
    ]
    message_id = live[0][1]["messageId"]

    assert await read_frames(client, "GET", events_url(message_id), user) == live
    after_two = await read_frames(
        client, "GET", events_url(message_id), user, headers={"Last-Event-ID": f"{message_id}:2"}
    )
    assert after_two == live[2:]
    assert await read_frames(client, "GET", f"{events_url(message_id)}?after=4", user) == live[4:]
    # The header wins over the query (an EventSource reconnecting sends the header).
    both = await read_frames(
        client,
        "GET",
        f"{events_url(message_id)}?after=1",
        user,
        headers={"Last-Event-ID": f"{message_id}:5"},
    )
    assert both == live[5:]
    assert await read_frames(client, "GET", f"{events_url(message_id)}?after=6", user) == []


async def test_a_cut_connection_resumes_with_every_event_once_in_order(
    client: httpx.AsyncClient, llm: Llm, user: AppUser, register_tools: Any, tool_log: ToolLog
) -> None:
    llm.fake.script(*tool_then_slow_answer(tool_log, register_tools))
    body = {"message": "find Smith", "provider": llm.name}
    # The client goes away after two frames; the run goes on (the tool is called, the
    # provider answers) and the client resumes while it still runs.
    first = await read_frames(client, "POST", f"{CHAT}?ids=1", user, body=body, stop_after=2)
    message_id = first[0][1]["messageId"]
    rest = await read_frames(
        client, "GET", events_url(message_id), user, headers={"Last-Event-ID": first[-1][0]}
    )
    got = first + rest
    assert [frame_id for frame_id, _ in got] == [f"{message_id}:{n}" for n in range(1, 7)]
    assert types([e for _, e in got])[-1] == "message_complete"
    assert got[-1][1]["message"]["content"] == "Looking. Found Smith."
    assert await read_frames(client, "GET", events_url(message_id), user) == got
    assert len(tool_log.calls) == 1


async def test_only_the_owner_reads_a_message_and_ids_are_checked(
    client: httpx.AsyncClient, llm: Llm, user: AppUser, users: UserFactory
) -> None:
    llm.fake.script(Reply(text="Hello"))
    _, events = await stream_chat(client, user, {"message": "hi", "provider": llm.name})
    message_id = events[0]["messageId"]
    other = await users.create()
    for who, url in ((other, events_url(message_id)), (user, events_url("msg_1_unknown"))):
        response = await client.get(url, headers=who.headers)
        assert (response.status_code, response.json()) == (404, {"error": "Message not found"})
    for bad in ("7", f"{message_id}:x", "msg_1_other:1", f"{message_id}:-1"):
        response = await client.get(
            events_url(message_id), headers={**user.headers, "Last-Event-ID": bad}
        )
        assert response.status_code == 400
        assert response.json()["error"].startswith("Invalid Last-Event-ID")
    response = await client.get(f"{events_url(message_id)}?after=-1", headers=user.headers)
    assert response.status_code == 400
    response = await client.get(events_url(message_id))
    assert response.status_code == 401


async def test_events_are_kept_24_hours(
    client: httpx.AsyncClient, server: RunningServer, llm: Llm, user: AppUser
) -> None:
    llm.fake.script(Reply(text="Hello"))
    _, events = await stream_chat(client, user, {"message": "hi", "provider": llm.name})
    message_id = events[0]["messageId"]

    async def finished() -> bool:
        found = await run_owner_status(server.db, message_id)
        return found is not None and found[1] == DONE

    await wait_for(finished)
    assert await prune(server.db) == 0
    assert len(await events_after(server.db, message_id, 0)) == 3
    async with writing(server.db) as db:  # a day and a bit later
        await db.execute(
            update(ChatRun)
            .where(ChatRun.message_id == message_id)
            .values(created_at=utcnow() - KEPT_FOR * 1.01)
        )
    assert await prune(server.db) == 3
    assert await events_after(server.db, message_id, 0) == []
    response = await client.get(events_url(message_id), headers=user.headers)
    assert (response.status_code, response.json()) == (404, {"error": "Message not found"})


async def test_an_answer_closed_as_interrupted_meanwhile_still_ends_and_replays(
    client: httpx.AsyncClient, server: RunningServer, llm: Llm, user: AppUser
) -> None:
    """Another process closed the answer as interrupted meanwhile: the answer's last write (the
    message, message_complete and the run's end) replaces that copy, and its last events are
    still stored."""
    llm.fake.script(Reply(text="The whole answer.", delay_s=0.5))
    body = {"message": "hi", "provider": llm.name}
    first = await read_frames(client, "POST", f"{CHAT}?ids=1", user, body=body, stop_after=1)
    message_id, conversation_id = first[0][1]["messageId"], first[0][1]["conversationId"]
    async with writing(server.db) as session:  # what another process's close_stale saves
        session.add(
            Message(
                id=message_id,
                conversation_id=conversation_id,
                role="assistant",
                content="",
                interrupted=True,
                created_at=utcnow(),
            )
        )
    frames = await read_frames(client, "GET", events_url(message_id), user)
    assert [event["type"] for _, event in frames] == [
        "message_start",
        "content_delta",
        "message_complete",
    ]
    assert [frame_id for frame_id, _ in frames] == [f"{message_id}:{n}" for n in (1, 2, 3)]
    assert frames[-1][1]["message"]["content"] == "The whole answer."
    assert "interrupted" not in frames[-1][1]["message"]
    stored = await stored_messages(server, conversation_id)
    assert [(m.id, m.content, m.interrupted) for m in stored[1:]] == [
        (message_id, "The whole answer.", False)
    ]
    await wait_for(lambda: _status_is(server, message_id, DONE))


async def _status_is(server: RunningServer, message_id: str, status: str) -> bool:
    owner_status = await run_owner_status(server.db, message_id)
    return owner_status is not None and owner_status[1] == status
