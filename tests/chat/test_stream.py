"""The chat stream end to end: the real service, the real SDKs, the loopback
fakes of both APIs, events read with a real SSE client. Every test runs for both providers
and asserts (in the `llm` fixture) that no request was one the real API would reject."""

from __future__ import annotations

import json
import time
from typing import Any

import httpx
import pytest

from controlcenter.chat.agent import SYSTEM_PROMPT
from controlcenter.chat.models import RUNNING
from controlcenter.chat.run.stored import run_owner_status
from tests.chat.conftest import ToolLog, recording_tool
from tests.chat.helpers import (
    CHAT,
    ISO,
    MESSAGE_ID,
    Llm,
    count_rows,
    set_settings,
    stored_messages,
    stream_chat,
    types,
    wait_for,
)
from tests.conftest import AppUser, RunningServer, UserFactory
from tests.dbtools import failing_write
from tests.fakes.llm import ErrorReply, Reply, ToolUse


async def test_plain_answer(
    client: httpx.AsyncClient, server: RunningServer, llm: Llm, user: AppUser
) -> None:
    llm.fake.script(Reply(text="Hello broker"))
    message = "  Which contacts should I call today? " + "x" * 200
    response, events = await stream_chat(client, user, {"message": message, "provider": llm.name})
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/event-stream"
    assert response.headers["cache-control"] == "no-cache"
    assert response.headers["connection"] == "keep-alive"
    assert types(events) == ["message_start", "content_delta", "message_complete"]
    start, delta, complete = events
    assert set(start) == {"type", "conversationId", "messageId"}
    assert MESSAGE_ID.match(start["messageId"])
    assert delta == {"type": "content_delta", "delta": "Hello broker"}
    assert set(complete) == {"type", "message"}
    final = complete["message"]
    assert set(final) == {"id", "role", "content", "createdAt", "usage", "parts"}
    assert final["parts"] == [{"type": "text", "text": "Hello broker"}]
    assert final["id"] == start["messageId"]
    assert (final["role"], final["content"]) == ("assistant", "Hello broker")
    assert ISO.match(final["createdAt"])

    # One provider call with the message as sent, the system prompt, and no tools.
    assert len(llm.fake.requests) == 1
    request = llm.fake.requests[0]
    assert llm.turns(request) == [("user", message)]
    assert llm.system(request) == SYSTEM_PROMPT
    assert llm.offered_tools(request) == []

    stored = await stored_messages(server, start["conversationId"])
    assert [(m.role, m.content) for m in stored] == [
        ("user", message),
        ("assistant", "Hello broker"),
    ]
    assert stored[1].id == start["messageId"]
    assert stored[1].tool_calls is None and stored[1].tool_results is None
    listed = (await client.get("/api/v1/control-center/conversations", headers=user.headers)).json()
    assert [c["title"] for c in listed["conversations"]] == [message[:100]]


async def test_frames_are_data_lines_followed_by_a_blank_line(
    client: httpx.AsyncClient, llm: Llm, user: AppUser
) -> None:
    llm.fake.script(Reply(text='Ünïcode ✓ and "quotes"\nnew line'))
    body = {"message": "hi", "provider": llm.name}
    async with client.stream("POST", CHAT, json=body, headers=user.headers) as response:
        raw = b"".join([chunk async for chunk in response.aiter_bytes()]).decode()
    frames = raw.split("\n\n")
    assert frames[-1] == ""
    parsed = []
    for frame in frames[:-1]:
        assert frame.startswith("data: ") and "\n" not in frame
        parsed.append(json.loads(frame[len("data: ") :]))
    assert [p["type"] for p in parsed] == ["message_start", "content_delta", "message_complete"]
    assert parsed[1]["delta"] == 'Ünïcode ✓ and "quotes"\nnew line'


async def test_message_start_arrives_before_the_provider_answers(
    client: httpx.AsyncClient, llm: Llm, user: AppUser
) -> None:
    llm.fake.script(Reply(text="slow answer", delay_s=1.0))
    body = {"message": "hi", "provider": llm.name}
    arrivals: list[tuple[str, float]] = []
    async with client.stream("POST", CHAT, json=body, headers=user.headers) as response:
        started = time.monotonic()
        async for line in response.aiter_lines():
            if line.startswith("data: "):
                arrivals.append((json.loads(line[6:])["type"], time.monotonic() - started))
    assert [kind for kind, _ in arrivals] == ["message_start", "content_delta", "message_complete"]
    assert arrivals[0][1] < 0.6
    assert arrivals[1][1] - arrivals[0][1] >= 0.9


async def test_one_tool_call(
    client: httpx.AsyncClient,
    server: RunningServer,
    llm: Llm,
    user: AppUser,
    register_tools: Any,
    tool_log: ToolLog,
) -> None:
    register_tools([recording_tool("contact_search", tool_log)])
    llm.fake.script(
        Reply(
            text="Let me look.",
            tool_uses=[ToolUse("contact_search", {"q": "Smith"}, id="call_1")],
        ),
        Reply(text=" Found Smith."),
    )
    _, events = await stream_chat(client, user, {"message": "Find Smith", "provider": llm.name})
    assert types(events) == [
        "message_start",
        "content_delta",
        "tool_call_start",
        "tool_result",
        "content_delta",
        "message_complete",
    ]
    call = {"id": "call_1", "name": "contact_search", "arguments": {"q": "Smith"}}
    result = {
        "toolCallId": "call_1",
        "success": True,
        "result": {"tool": "contact_search", "echo": {"q": "Smith"}},
    }
    assert events[2] == {"type": "tool_call_start", "toolCall": call}
    assert events[3] == {"type": "tool_result", "toolResult": result}
    final = events[-1]["message"]
    assert final["content"] == "Let me look. Found Smith."
    assert final["toolCalls"] == [call]
    assert final["toolResults"] == [result]
    assert tool_log.calls == [("contact_search", {"q": "Smith"}, user.id)]

    assert len(llm.fake.requests) == 2
    assert llm.offered_tools(llm.fake.requests[0]) == ["contact_search"]
    line = f"Tool call_1 result: {json.dumps(result['result'], ensure_ascii=False)}"
    assert llm.turns(llm.fake.requests[1]) == [
        ("user", "Find Smith"),
        ("assistant", "Let me look."),
        ("assistant", 'call contact_search {"q": "Smith"}'),
        ("tool" if llm.name == "provider_b" else "user", line),
    ]
    stored = await stored_messages(server, events[0]["conversationId"])
    assert stored[1].tool_calls == [call]
    assert stored[1].tool_results == [result]


async def test_several_tool_calls_failing_and_unknown_tools(
    client: httpx.AsyncClient,
    llm: Llm,
    user: AppUser,
    register_tools: Any,
    tool_log: ToolLog,
) -> None:
    register_tools(
        [
            recording_tool("contact_search", tool_log),
            recording_tool("contact_explode", tool_log),
            recording_tool("calendar_list", tool_log),
        ]
    )
    llm.fake.script(
        Reply(
            tool_uses=[
                ToolUse("contact_search", {"q": "a"}, id="c1"),
                ToolUse("contact_explode", {}, id="c2"),
                ToolUse("no_such_tool", {"x": 1}, id="c3"),
                ToolUse("calendar_list", {"q": 7}, id="c4"),  # fails the schema
            ]
        ),
        Reply(text="Done."),
    )
    _, events = await stream_chat(client, user, {"message": "go", "provider": llm.name})
    assert types(events) == [
        "message_start",
        *["tool_call_start", "tool_result"] * 4,
        "content_delta",
        "message_complete",
    ]
    results = [e["toolResult"] for e in events if e["type"] == "tool_result"]
    assert results == [
        {
            "toolCallId": "c1",
            "success": True,
            "result": {"tool": "contact_search", "echo": {"q": "a"}},
        },
        {"toolCallId": "c2", "success": False, "error": "Tool contact_explode failed unexpectedly"},
        {"toolCallId": "c3", "success": False, "error": "Unknown tool: no_such_tool"},
        {
            "toolCallId": "c4",
            "success": False,
            "error": "Invalid arguments: 7 is not of type 'string' (at q)",
        },
    ]
    # The handler of a call that fails the schema never runs.
    assert [name for name, _, _ in tool_log.calls] == ["contact_search", "contact_explode"]
    assert events[-1]["message"]["toolResults"] == results
    second = llm.turns(llm.fake.requests[1])
    assert [text for _, text in second[-4:]] == [
        'Tool c1 result: {"tool": "contact_search", "echo": {"q": "a"}}',
        "Tool c2 error: Tool contact_explode failed unexpectedly",
        "Tool c3 error: Unknown tool: no_such_tool",
        "Tool c4 error: Invalid arguments: 7 is not of type 'string' (at q)",
    ]


async def test_ten_iterations_at_most(
    client: httpx.AsyncClient,
    server: RunningServer,
    llm: Llm,
    user: AppUser,
    register_tools: Any,
    tool_log: ToolLog,
) -> None:
    register_tools([recording_tool("contact_search", tool_log)])
    llm.fake.script(
        *[
            Reply(
                text=f"step {i}.", tool_uses=[ToolUse("contact_search", {"q": str(i)}, id=f"t{i}")]
            )
            for i in range(12)
        ]
    )
    _, events = await stream_chat(client, user, {"message": "loop", "provider": llm.name})
    assert len(llm.fake.requests) == 10  # no 11th call
    assert types(events).count("tool_call_start") == 10
    assert types(events).count("tool_result") == 10
    assert types(events)[-1] == "message_complete"
    final = events[-1]["message"]
    assert final["content"] == "".join(f"step {i}." for i in range(10))
    assert [c["id"] for c in final["toolCalls"]] == [f"t{i}" for i in range(10)]
    stored = await stored_messages(server, events[0]["conversationId"])
    assert stored[-1].content == final["content"] and len(stored[-1].tool_results or []) == 10


async def test_conversation_not_found_saves_nothing(
    client: httpx.AsyncClient,
    server: RunningServer,
    users: UserFactory,
    llm: Llm,
    user: AppUser,
) -> None:
    llm.fake.script(Reply(text="first"))
    _, events = await stream_chat(client, user, {"message": "mine", "provider": llm.name})
    mine = events[0]["conversationId"]
    before = await count_rows(server)
    other = await users.create()
    await set_settings(server, {llm.setting: llm.fake.api_key}, other)
    for who, conversation_id in [
        (user, "00000000-0000-0000-0000-000000000000"),
        (user, ""),
        (user, 42),
        (user, {"id": mine}),
        (other, mine),  # another user's conversation is not theirs to see
    ]:
        response, events = await stream_chat(
            client, who, {"message": "hi", "conversationId": conversation_id, "provider": llm.name}
        )
        assert response.status_code == 200
        assert events == [{"type": "error", "error": "Conversation not found"}]
    assert len(llm.fake.requests) == 1
    assert await count_rows(server) == before


async def test_null_conversation_id_starts_a_new_one(
    client: httpx.AsyncClient, server: RunningServer, llm: Llm, user: AppUser
) -> None:
    _, events = await stream_chat(
        client, user, {"message": "hi", "conversationId": None, "provider": llm.name}
    )
    assert types(events) == ["message_start", "content_delta", "message_complete"]
    assert await count_rows(server) == (1, 2)


async def test_provider_errors_carry_their_status_code(
    client: httpx.AsyncClient, server: RunningServer, llm: Llm, user: AppUser
) -> None:
    cases = [(401, "invalid x-api-key"), (429, "Rate limited, slow down"), (500, "Internal boom")]
    for status, text in cases:
        llm.fake.script(ErrorReply(status, text))
        response, events = await stream_chat(client, user, {"message": "hi", "provider": llm.name})
        assert response.status_code == 200
        assert types(events) == ["message_start", "error"]  # nothing after the error
        assert events[1] == {"type": "error", "error": text, "code": str(status)}
        assert llm.fake.api_key not in json.dumps(events)
        stored = await stored_messages(server, events[0]["conversationId"])
        assert [m.role for m in stored] == ["user"]  # the user message is kept


async def test_an_error_whose_run_end_cannot_be_stored_still_ends_the_stream(
    client: httpx.AsyncClient,
    server: RunningServer,
    llm: Llm,
    user: AppUser,
    capfd: pytest.CaptureFixture[str],
) -> None:
    """The database refuses the failed run's end (its error event is stored with it): the
    error still reaches the client, sent live, and the refusal is logged, not shown."""
    llm.fake.script(ErrorReply(500, "Internal boom"))
    async with failing_write(server.db, "chat_events", "NEW.data LIKE '%Internal boom%'"):
        response, events = await stream_chat(client, user, {"message": "hi", "provider": llm.name})
    assert response.status_code == 200
    assert types(events) == ["message_start", "error"]
    assert events[1] == {"type": "error", "error": "Internal boom", "code": "500"}
    # Not stored: the run is still marked running, for another process to close as stale.
    assert await run_owner_status(server.db, str(events[0]["messageId"])) == (user.id, RUNNING)
    logged = capfd.readouterr()
    assert "chat run's end not stored" in logged.out + logged.err


async def test_a_wrong_key_is_a_401_error_event_without_the_key(
    client: httpx.AsyncClient, server: RunningServer, llm: Llm, user: AppUser
) -> None:
    wrong = "sk-wrong-" + "z" * 40
    await set_settings(server, {llm.setting: wrong}, user)
    _, events = await stream_chat(client, user, {"message": "hi", "provider": llm.name})
    assert types(events) == ["message_start", "error"]
    assert events[1]["code"] == "401"
    assert wrong not in json.dumps(events) and wrong[-8:] not in events[1]["error"]


async def test_second_turn_carries_the_history(
    client: httpx.AsyncClient,
    server: RunningServer,
    llm: Llm,
    user: AppUser,
    register_tools: Any,
    tool_log: ToolLog,
) -> None:
    register_tools([recording_tool("contact_search", tool_log)])
    llm.fake.script(
        Reply(tool_uses=[ToolUse("contact_search", {"q": "x"}, id="h1")]),  # no text
        Reply(text="You have 3 contacts."),
    )
    _, first = await stream_chat(client, user, {"message": "How many?", "provider": llm.name})
    conversation_id = first[0]["conversationId"]
    llm.fake.reset()
    llm.fake.script(Reply(text="Sure."))
    _, second = await stream_chat(
        client,
        user,
        {"message": "Thanks", "conversationId": conversation_id, "provider": llm.name},
    )
    assert types(second) == ["message_start", "content_delta", "message_complete"]
    assert second[0]["conversationId"] == conversation_id
    assert second[0]["messageId"] != first[0]["messageId"]
    assert llm.turns(llm.fake.requests[0]) == [
        ("user", "How many?"),
        ("assistant", "You have 3 contacts."),
        ("user", "Thanks"),
    ]
    stored = await stored_messages(server, conversation_id)
    assert [(m.role, m.content) for m in stored] == [
        ("user", "How many?"),
        ("assistant", "You have 3 contacts."),
        ("user", "Thanks"),
        ("assistant", "Sure."),
    ]


async def test_empty_stored_content_is_left_out_of_the_history(
    client: httpx.AsyncClient, llm: Llm, user: AppUser
) -> None:
    llm.fake.script(Reply(text=""))  # an answer without text is saved with empty content
    _, first = await stream_chat(client, user, {"message": "one", "provider": llm.name})
    assert types(first) == ["message_start", "message_complete"]
    assert first[1]["message"]["content"] == ""
    llm.fake.script(Reply(text="ok"))
    await stream_chat(
        client,
        user,
        {"message": "two", "conversationId": first[0]["conversationId"], "provider": llm.name},
    )
    turns = llm.turns(llm.fake.requests[-1])
    assert [text for _, text in turns] in (["one", "two"], ["one\n\ntwo"], ["one\ntwo"])


async def test_client_disconnect_does_not_stop_the_reply(
    client: httpx.AsyncClient, server: RunningServer, llm: Llm, user: AppUser
) -> None:
    llm.fake.script(Reply(text="saved anyway", delay_s=0.8))
    body = {"message": "hi", "provider": llm.name}
    async with client.stream("POST", CHAT, json=body, headers=user.headers) as response:
        async for line in response.aiter_lines():
            if line.startswith("data: "):
                conversation_id = json.loads(line[6:])["conversationId"]
                break
    # The connection is closed now, before the provider has answered.
    assert len(await stored_messages(server, conversation_id)) == 1

    async def saved() -> bool:
        return len(await stored_messages(server, conversation_id)) == 2

    await wait_for(saved)
    stored = await stored_messages(server, conversation_id)
    assert (stored[1].role, stored[1].content) == ("assistant", "saved anyway")


class _Raises:
    """A provider (our own protocol, not an SDK) that fails with a given exception."""

    def __init__(self, exc: Exception) -> None:
        self.exc = exc

    async def complete(self, **kwargs: Any) -> Any:
        raise self.exc


async def test_other_exceptions_become_error_events_without_code(
    client: httpx.AsyncClient,
    server: RunningServer,
    llm: Llm,
    user: AppUser,
    capfd: pytest.CaptureFixture[str],
) -> None:
    providers = server.chat.providers
    assert isinstance(providers, dict)
    real = providers[llm.name]
    cases = [
        (RuntimeError("database exploded"), "database exploded"),
        (RuntimeError(), "An unexpected error occurred"),
        (ValueError(f"bad key {llm.fake.api_key}"), "bad key ••••"),
    ]
    try:
        for exc, expected in cases:
            providers[llm.name] = _Raises(exc)
            _, events = await stream_chat(client, user, {"message": "hi", "provider": llm.name})
            assert events[1:] == [{"type": "error", "error": expected}]
            assert types(events) == ["message_start", "error"]
    finally:
        providers[llm.name] = real
    logged = capfd.readouterr()
    assert "bad key ••••" in logged.out + logged.err  # logged, with its traceback, but redacted
    assert llm.fake.api_key not in logged.out + logged.err
