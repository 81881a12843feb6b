"""`?deltas=tokens`: the providers in streaming mode through their SDKs, against
fakes that speak both APIs' streaming wire formats; tool calls included; a client that goes
away in the middle of a token stream resumes with every piece once."""

from __future__ import annotations

from typing import Any

import httpx

from tests.chat.conftest import ToolLog, recording_tool
from tests.chat.helpers import CHAT, Llm, stored_messages, stream_chat, types
from tests.chat.test_resume import events_url, read_frames
from tests.conftest import AppUser, RunningServer
from tests.fakes.llm import FakeAnthropic, FakeOpenAI, Reply, ToolUse

TOKENS = f"{CHAT}?deltas=tokens"


def deltas(events: list[dict[str, Any]]) -> list[str]:
    return [e["delta"] for e in events if e["type"] == "content_delta"]


async def test_text_arrives_in_pieces_whose_concatenation_is_the_reply(
    client: httpx.AsyncClient, server: RunningServer, llm: Llm, user: AppUser
) -> None:
    text = "Three contacts need a call today: Smith, Jones and Lee."
    llm.fake.script(Reply(text=text, usage=(40, 7)))
    body = {"message": "who?", "provider": llm.name}
    frames = await read_frames(client, "POST", TOKENS, user, body=body)
    events = [e for _, e in frames]
    pieces = deltas(events)
    assert len(pieces) == len(Reply(text=text).chunks()) > 1
    assert "".join(pieces) == text == events[-1]["message"]["content"]
    assert events[-1]["message"]["usage"] == {
        "inputTokens": 40,
        "outputTokens": 7,
        "providerCalls": 1,
    }
    request = llm.fake.requests[-1]
    assert request["stream"] is True
    if llm.name == "provider_b":
        assert request["stream_options"] == {"include_usage": True}
    stored = await stored_messages(server, events[0]["conversationId"])
    assert stored[-1].content == text

    llm.fake.script(Reply(text=text))  # without the parameter: one delta, no streaming
    _, events = await stream_chat(client, user, body)
    assert deltas(events) == [text]
    assert "stream" not in llm.fake.requests[-1]


async def test_tool_calls_come_through_the_stream(
    client: httpx.AsyncClient, llm: Llm, user: AppUser, register_tools: Any, tool_log: ToolLog
) -> None:
    register_tools([recording_tool("contact_search", tool_log)])
    llm.fake.script(
        Reply(
            text="Let me look.",
            tool_uses=[
                ToolUse("contact_search", {"q": "Smith"}, id="call_1"),
                ToolUse("contact_search", {"q": "Lee", "limit": 2}, id="call_2"),
            ],
        ),
        Reply(text="Found both."),
    )
    frames = await read_frames(
        client, "POST", TOKENS, user, body={"message": "find", "provider": llm.name}
    )
    events = [e for _, e in frames]
    assert [name for name, _, _ in tool_log.calls] == ["contact_search", "contact_search"]
    assert [args for _, args, _ in tool_log.calls] == [{"q": "Smith"}, {"q": "Lee", "limit": 2}]
    starts = [e["toolCall"] for e in events if e["type"] == "tool_call_start"]
    assert [(c["id"], c["arguments"]) for c in starts] == [
        ("call_1", {"q": "Smith"}),
        ("call_2", {"q": "Lee", "limit": 2}),
    ]
    assert events[-1]["message"]["content"] == "Let me look.Found both."
    assert "".join(deltas(events)) == "Let me look.Found both."
    assert all(r["stream"] is True for r in llm.fake.requests)
    assert len(llm.fake.requests) == 2  # the second request carried both results (strict fake)


async def test_a_disconnect_in_the_middle_of_a_token_stream_resumes_every_piece_once(
    client: httpx.AsyncClient, server: RunningServer, llm: Llm, user: AppUser
) -> None:
    text = "one two three four five six seven eight"
    llm.fake.script(Reply(text=text, chunk_delay_s=0.05))
    body = {"message": "count", "provider": llm.name}
    cut = await read_frames(
        client, "POST", f"{TOKENS}&ids=1", user, body=body, stop_after=3
    )  # message_start and two pieces
    assert types([e for _, e in cut]) == ["message_start", "content_delta", "content_delta"]
    message_id = cut[0][1]["messageId"]
    rest = await read_frames(
        client, "GET", events_url(message_id), user, headers={"Last-Event-ID": cut[-1][0]}
    )
    got = cut + rest
    assert [i for i, _ in got] == [f"{message_id}:{n}" for n in range(1, len(got) + 1)]
    events = [e for _, e in got]
    assert "".join(deltas(events)) == text == events[-1]["message"]["content"]
    stored = await stored_messages(server, cut[0][1]["conversationId"])
    assert stored[-1].content == text


async def test_the_fakes_refuse_what_the_apis_refuse_about_streaming(
    fake_anthropic: FakeAnthropic, fake_openai: FakeOpenAI
) -> None:
    anthropic_body = {
        "model": "claude-sonnet-5-5",
        "max_tokens": 10,
        "messages": [{"role": "user", "content": "hi"}],
        "stream": "yes",
    }
    async with httpx.AsyncClient(timeout=10) as http:
        answer = await http.post(
            f"{fake_anthropic.url}/v1/messages",
            json=anthropic_body,
            headers={"x-api-key": fake_anthropic.api_key, "anthropic-version": "2023-06-01"},
        )
        assert answer.status_code == 400
        assert answer.json()["error"]["message"] == "stream: Input should be a valid boolean"
        openai_headers = {"Authorization": f"Bearer {fake_openai.api_key}"}
        openai_body: dict[str, Any] = {
            "model": "gpt-5.5",
            "messages": [{"role": "user", "content": "hi"}],
            "stream_options": {"include_usage": True},
        }
        for stream, message in (
            (None, "The 'stream_options' parameter is only allowed when 'stream' is enabled."),
            (False, "The 'stream_options' parameter is only allowed when 'stream' is enabled."),
            ("1", "Invalid type for 'stream': expected a boolean, but got str instead."),
        ):
            sent = dict(openai_body) if stream is None else {**openai_body, "stream": stream}
            answer = await http.post(
                f"{fake_openai.url}/chat/completions", json=sent, headers=openai_headers
            )
            assert answer.status_code == 400, sent
            assert answer.json()["error"]["message"] == message
        answer = await http.post(
            f"{fake_openai.url}/chat/completions",
            json={**openai_body, "stream": True, "stream_options": {"include_usage": "yes"}},
            headers=openai_headers,
        )
        assert answer.status_code == 400
    fake_anthropic.invalid.clear()
    fake_openai.invalid.clear()
