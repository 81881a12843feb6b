"""An answer keeps the order of its text and tool calls: `parts`, in `message_complete` and
in the conversation's GET; `content` stays the plain concatenation."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from httpx_sse import aconnect_sse

from tests.chat.conftest import ToolLog, recording_tool
from tests.chat.helpers import CHAT, CONVERSATIONS, Llm
from tests.conftest import AppUser
from tests.fakes.llm import Reply, ToolUse


@pytest.mark.parametrize("deltas", ["", "?deltas=tokens"])
async def test_text_and_tool_calls_keep_their_order(
    client: httpx.AsyncClient,
    llm: Llm,
    user: AppUser,
    register_tools: Any,
    tool_log: ToolLog,
    deltas: str,
) -> None:
    register_tools([recording_tool("contact_search", tool_log)])
    llm.fake.script(
        Reply(
            text="Let me look. Two calls:",
            tool_uses=[
                ToolUse("contact_search", {"q": "a"}, id="call_1"),
                ToolUse("contact_search", {"q": "b"}, id="call_2"),
            ],
        ),
        Reply(text="Found them both."),
    )
    body = {"message": "find a and b", "provider": llm.name}
    async with aconnect_sse(client, "POST", CHAT + deltas, json=body, headers=user.headers) as sse:
        events = [json.loads(event.data) async for event in sse.aiter_sse()]
    message = events[-1]["message"]
    expected = [
        {"type": "text", "text": "Let me look. Two calls:"},
        {"type": "toolCall", "toolCallId": "call_1"},
        {"type": "toolCall", "toolCallId": "call_2"},
        {"type": "text", "text": "Found them both."},
    ]
    assert message["parts"] == expected
    assert message["content"] == "Let me look. Two calls:Found them both."
    conversation_id = events[0]["conversationId"]
    got = await client.get(f"{CONVERSATIONS}/{conversation_id}", headers=user.headers)
    asked, answered = got.json()["conversation"]["messages"]
    assert "parts" not in asked
    assert answered["parts"] == expected
