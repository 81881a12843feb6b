"""The Messages API's JSON answer read without the SDK's `Message` (providers/anthropic.py):
the same reply as the SDK's model gives, and the same tolerance of missing parts."""

from __future__ import annotations

from typing import Any

import pytest
from anthropic._models import construct_type
from anthropic.types import Message

from controlcenter.providers.anthropic import _reply, _reply_json

ANSWER: dict[str, Any] = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "claude",
    "stop_reason": "tool_use",
    "stop_sequence": None,
    "content": [
        {"type": "text", "text": "Looking "},
        {"type": "tool_use", "id": "toolu_1", "name": "crm_search", "input": {"q": "Ac"}},
        {"type": "text", "text": "it up"},
        {"type": "tool_use", "id": "toolu_2", "name": "crm_tag", "input": "not an object"},
        {"type": "thinking", "thinking": "hidden", "signature": "s"},
    ],
    "usage": {"input_tokens": 12, "output_tokens": 7},
}


def test_the_same_reply_as_the_sdks_message() -> None:
    # What the SDK's `post(cast_to=Message)` did with the JSON (`_process_response_data`).
    sdk_message = construct_type(type_=Message, value=ANSWER)
    assert isinstance(sdk_message, Message)
    assert _reply_json(ANSWER) == _reply(sdk_message)


@pytest.mark.parametrize(
    "answer",
    [
        None,
        [],
        {},
        {"content": None, "usage": None},
        {"content": ["text"], "usage": {"input_tokens": True, "output_tokens": "3"}},
    ],
)
def test_missing_or_odd_parts_are_empty(answer: Any) -> None:
    reply = _reply_json(answer)
    assert (reply.text, reply.tool_calls, reply.input_tokens, reply.output_tokens) == (
        "",
        (),
        0,
        0,
    )


def test_a_tool_call_without_id_gets_one() -> None:
    (call,) = _reply_json({"content": [{"type": "tool_use", "name": "t", "input": {}}]}).tool_calls
    assert call.id and call.name == "t" and call.arguments == {}
