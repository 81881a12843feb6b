"""The Messages API's JSON answer as `provider_a` reads it (providers/anthropic.py reads the
JSON itself, not through the SDK's `Message`): the same reply as the SDK's own `create` gives,
and the same tolerance of missing parts. Each answer is served by the fake API as it is."""

from __future__ import annotations

import json
from typing import Any

import anthropic
import pytest

from controlcenter.config import Config
from controlcenter.llm.types import ProviderReply, ToolInvocation, UserTurn
from controlcenter.providers.base import PROVIDER_A, Provider, ProviderError
from controlcenter.providers.history import UNREADABLE_MESSAGE
from tests.fakes.llm import FakeAnthropic, RawReply
from tests.providers.conftest import TIMEOUT_S

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


MODEL: str = Config.model_fields["provider_a_model"].default


def served(answer: Any) -> RawReply:
    return RawReply(json.dumps(answer), content_type="application/json")


async def reply_to(provider: Provider, fake: FakeAnthropic, answer: Any) -> ProviderReply:
    fake.script(served(answer))
    return await provider.complete(
        api_key=fake.api_key, system="", turns=[UserTurn("Find Acme")], tools=()
    )


async def test_the_same_reply_as_the_sdks_message(
    providers: dict[str, Provider], fake_anthropic: FakeAnthropic
) -> None:
    reply = await reply_to(providers[PROVIDER_A], fake_anthropic, ANSWER)
    assert reply == ProviderReply(
        text="Looking it up",
        tool_calls=(
            ToolInvocation("toolu_1", "crm_search", {"q": "Ac"}),
            ToolInvocation("toolu_2", "crm_tag", {}),  # an input that is no object: none
        ),
        input_tokens=12,
        output_tokens=7,
    )
    # What the SDK's own `create` reads in the same answer.
    fake_anthropic.script(served(ANSWER))
    async with anthropic.AsyncAnthropic(
        api_key=fake_anthropic.api_key,
        base_url=fake_anthropic.url,
        timeout=TIMEOUT_S,
        max_retries=0,
    ) as client:
        message = await client.messages.create(
            model=MODEL, max_tokens=10, messages=[{"role": "user", "content": "Find Acme"}]
        )
    blocks = message.content
    assert reply.text == "".join(b.text for b in blocks if b.type == "text")
    assert [(c.id, c.name) for c in reply.tool_calls] == [
        (b.id, b.name) for b in blocks if b.type == "tool_use"
    ]
    assert (reply.input_tokens, reply.output_tokens) == (
        message.usage.input_tokens,
        message.usage.output_tokens,
    )


@pytest.mark.parametrize(
    "answer",
    [
        {},
        {"content": None, "usage": None},
        {"content": ["text"], "usage": {"input_tokens": True, "output_tokens": "3"}},
    ],
)
async def test_missing_or_odd_parts_are_empty(
    providers: dict[str, Provider], fake_anthropic: FakeAnthropic, answer: Any
) -> None:
    reply = await reply_to(providers[PROVIDER_A], fake_anthropic, answer)
    assert (reply.text, reply.tool_calls, reply.input_tokens, reply.output_tokens) == (
        "",
        (),
        0,
        0,
    )


@pytest.mark.parametrize("answer", [None, [], "text"])
async def test_an_answer_that_is_no_object_is_unreadable(
    providers: dict[str, Provider], fake_anthropic: FakeAnthropic, answer: Any
) -> None:
    with pytest.raises(ProviderError) as caught:
        await reply_to(providers[PROVIDER_A], fake_anthropic, answer)
    assert caught.value.message == UNREADABLE_MESSAGE


async def test_a_tool_call_without_id_gets_one(
    providers: dict[str, Provider], fake_anthropic: FakeAnthropic
) -> None:
    answer = {"content": [{"type": "tool_use", "name": "t", "input": {}}]}
    (call,) = (await reply_to(providers[PROVIDER_A], fake_anthropic, answer)).tool_calls
    assert call.id and call.name == "t" and call.arguments == {}
