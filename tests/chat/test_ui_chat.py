"""POST /ui-chat read by the Vercel AI SDK itself (tests/node/ui_chat.mjs): its transport
posts the body `useChat` sends and validates every chunk with the package's schema, and its
readUIMessageStream builds the message a screen shows."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.chat.conftest import ToolLog, recording_tool
from tests.chat.helpers import set_settings, stored_messages
from tests.conftest import AppUser, RunningServer, UserFactory
from tests.fakes.llm import ErrorReply, FakeAnthropic, Reply, ToolUse

UI_CHAT = "/api/v1/control-center/ui-chat"
SCRIPT = Path(__file__).resolve().parents[1] / "node" / "ui_chat.mjs"


@pytest.fixture
async def ui_user(
    server: RunningServer, users: UserFactory, fake_anthropic: FakeAnthropic
) -> AppUser:
    created = await users.create()
    await set_settings(server, {"providerAApiKey": fake_anthropic.api_key}, created)
    return created


def user_message(text: str, number: int = 1) -> dict[str, Any]:
    return {"id": f"u{number}", "role": "user", "parts": [{"type": "text", "text": text}]}


async def ai_sdk_turn(
    server: RunningServer,
    user: AppUser,
    messages: list[dict[str, Any]],
    body: dict[str, Any] | None = None,
    **request: str,
) -> dict[str, Any]:
    """One turn as the SDK sends it; `request`: its `trigger` and `messageId`."""
    node = shutil.which("node")
    assert node, "Node.js is missing: run ./scripts/ensure-node.sh (make test does)"
    assert (SCRIPT.parent / "node_modules" / "ai").is_dir(), "run ./scripts/ensure-node.sh"
    spec = {
        "url": server.url + UI_CHAT,
        "token": user.token,
        "chatId": "chat-1",
        "messages": messages,
        "body": body or {},
        **request,
    }
    process = await asyncio.create_subprocess_exec(
        node, str(SCRIPT), json.dumps(spec), stdout=asyncio.subprocess.PIPE
    )
    out, _ = await asyncio.wait_for(process.communicate(), timeout=30)
    assert process.returncode == 0
    result: dict[str, Any] = json.loads(out)
    return result


def chunk_types(result: dict[str, Any]) -> list[str]:
    return [chunk["type"] for chunk in result["chunks"]]


async def test_text_answer_then_a_second_turn(
    server: RunningServer, ui_user: AppUser, fake_anthropic: FakeAnthropic
) -> None:
    fake_anthropic.script(Reply(text="Hello there."))
    first = await ai_sdk_turn(server, ui_user, [user_message("Hi")])
    assert first["failure"] is None and first["errors"] == []
    assert first["status"] == 200
    assert first["headers"]["x-vercel-ai-ui-message-stream"] == "v1"
    assert first["headers"]["content-type"] == "text/event-stream"
    assert chunk_types(first) == ["start", "text-start", "text-delta", "text-end", "finish"]
    conversation_id = first["chunks"][0]["messageMetadata"]["conversationId"]
    message = first["message"]
    assert message["role"] == "assistant"
    assert message["metadata"] == {"conversationId": conversation_id}
    assert [p["text"] for p in message["parts"] if p["type"] == "text"] == ["Hello there."]

    # The second turn: the client sends the whole history and the conversation's id.
    fake_anthropic.script(Reply(text="Again."))
    history = [user_message("Hi"), message, user_message("Once more", 2)]
    second = await ai_sdk_turn(server, ui_user, history, {"conversationId": conversation_id})
    assert second["chunks"][0]["messageMetadata"] == {"conversationId": conversation_id}
    assert [p["text"] for p in second["message"]["parts"] if p["type"] == "text"] == ["Again."]
    # The provider saw the stored history (the chat's), not the client's copy.
    sent = fake_anthropic.requests[-1]["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "user"]
    stored = await stored_messages(server, conversation_id)
    assert [(m.role, m.content) for m in stored] == [
        ("user", "Hi"),
        ("assistant", "Hello there."),
        ("user", "Once more"),
        ("assistant", "Again."),
    ]


async def test_regenerate_and_edit_replace_the_stored_last_turn(
    server: RunningServer, ui_user: AppUser, fake_anthropic: FakeAnthropic
) -> None:
    fake_anthropic.script(Reply(text="Hello there."))
    first = await ai_sdk_turn(server, ui_user, [user_message("Hi")])
    conversation_id = first["chunks"][0]["messageMetadata"]["conversationId"]
    answer_id = first["message"]["id"]
    into = {"conversationId": conversation_id}

    # regenerate(): the client drops the answer and asks again with the same messages.
    fake_anthropic.script(Reply(text="Hi again."))
    again = await ai_sdk_turn(
        server,
        ui_user,
        [user_message("Hi")],
        into,
        trigger="regenerate-message",
        messageId=answer_id,
    )
    assert again["failure"] is None and again["errors"] == []
    assert [p["text"] for p in again["message"]["parts"] if p["type"] == "text"] == ["Hi again."]
    assert [m["role"] for m in fake_anthropic.requests[-1]["messages"]] == ["user"]
    stored = await stored_messages(server, conversation_id)
    assert [(m.role, m.content) for m in stored] == [("user", "Hi"), ("assistant", "Hi again.")]

    # sendMessage({text, messageId}): the user's message edited in place.
    fake_anthropic.script(Reply(text="Good evening."))
    edited = await ai_sdk_turn(
        server, ui_user, [user_message("Good evening")], into, messageId="u1"
    )
    assert edited["failure"] is None
    stored = await stored_messages(server, conversation_id)
    assert [(m.role, m.content) for m in stored] == [
        ("user", "Good evening"),
        ("assistant", "Good evening."),
    ]


async def test_two_tool_calls_and_a_failing_tool(
    server: RunningServer,
    ui_user: AppUser,
    fake_anthropic: FakeAnthropic,
    register_tools: Any,
    tool_log: ToolLog,
) -> None:
    register_tools(
        [recording_tool(n, tool_log) for n in ("contact_search", "contact_get", "contact_explode")]
    )
    fake_anthropic.script(
        Reply(
            text="Looking.",
            tool_uses=[
                ToolUse("contact_search", {"q": "Ann"}, id="toolu_1"),
                ToolUse("contact_get", {"q": "7"}, id="toolu_2"),
            ],
        ),
        Reply(tool_uses=[ToolUse("contact_explode", {"q": "x"}, id="toolu_3")]),
        Reply(text="Done."),
    )
    result = await ai_sdk_turn(server, ui_user, [user_message("Find Ann")])
    assert result["failure"] is None and result["errors"] == []
    assert chunk_types(result) == [
        "start",
        *("text-start", "text-delta", "text-end"),
        *("tool-input-available", "tool-output-available") * 2,
        *("tool-input-available", "tool-output-error"),
        *("text-start", "text-delta", "text-end"),
        "finish",
    ]
    tools = [p for p in result["message"]["parts"] if p["type"] == "dynamic-tool"]
    assert [(t["toolName"], t["toolCallId"], t["state"]) for t in tools] == [
        ("contact_search", "toolu_1", "output-available"),
        ("contact_get", "toolu_2", "output-available"),
        ("contact_explode", "toolu_3", "output-error"),
    ]
    assert tools[0]["input"] == {"q": "Ann"}
    assert tools[0]["output"] == {"tool": "contact_search", "echo": {"q": "Ann"}}
    assert tools[2]["errorText"] == "Tool contact_explode failed unexpectedly"
    texts = [p["text"] for p in result["message"]["parts"] if p["type"] == "text"]
    assert texts == ["Looking.", "Done."]


async def test_provider_error_is_an_error_chunk(
    server: RunningServer, ui_user: AppUser, fake_anthropic: FakeAnthropic
) -> None:
    fake_anthropic.script(ErrorReply(status=529, message="Overloaded"))
    result = await ai_sdk_turn(server, ui_user, [user_message("Hi")])
    assert chunk_types(result) == ["start", "error"]
    assert result["chunks"][1]["errorText"] == "Overloaded"
    assert result["errors"] == ["Overloaded"]  # readUIMessageStream's onError saw it


async def test_errors_before_the_stream_are_the_chats(
    server: RunningServer, ui_user: AppUser
) -> None:
    async with httpx.AsyncClient(base_url=server.url, headers=ui_user.headers) as http:
        no_text = {"id": "c", "trigger": "submit-message", "messages": []}
        response = await http.post(UI_CHAT, json=no_text)
        assert (response.status_code, response.json()) == (
            400,
            {"error": "Missing or empty message"},
        )
        last_is_assistant = {**no_text, "messages": [{"id": "a", "role": "assistant", "parts": []}]}
        response = await http.post(UI_CHAT, json=last_is_assistant)
        assert response.status_code == 400
        bad_provider = {**no_text, "messages": [user_message("Hi")], "provider": "x"}
        response = await http.post(UI_CHAT, json=bad_provider)
        assert response.json()["error"].startswith("Invalid provider")
        response = await http.post(UI_CHAT, content=b"{")
        assert (response.status_code, response.json()) == (400, {"error": "Invalid JSON body"})
        response = await http.post(UI_CHAT, json=no_text, headers={"Authorization": ""})
        assert response.status_code == 401
    await set_settings(server, {"providerAApiKey": ""}, ui_user)
    result = await ai_sdk_turn(server, ui_user, [user_message("Hi")])
    assert result["status"] == 400
    assert "No API key configured for provider_a" in result["failure"]
