from __future__ import annotations

from controlcenter.providers.base import (
    AssistantTurn,
    Provider,
    ToolResultsTurn,
    ToolSpec,
    UserTurn,
)
from controlcenter.tools.base import ToolCall, ToolResult
from tests.fakes.llm import FakeAnthropic, FakeOpenAI, Reply, ToolUse

SPEC = ToolSpec("crm_search", "Search", {"type": "object", "properties": {"q": {"type": "string"}}})


async def test_round_trip(case: tuple[Provider, FakeAnthropic | FakeOpenAI]) -> None:
    provider, fake = case
    fake.script(Reply(text="Let me look", tool_uses=[ToolUse("crm_search", {"q": "a"})]))
    reply = await provider.complete(
        api_key=fake.api_key, system="sys", turns=[UserTurn("hi")], tools=[SPEC]
    )
    assert reply.text == "Let me look"
    assert [c.name for c in reply.tool_calls] == ["crm_search"]
    call = reply.tool_calls[0]
    turns = [
        UserTurn("hi"),
        AssistantTurn(reply.text, reply.tool_calls),
        ToolResultsTurn((ToolResult(call.id, True, {"n": 1}),)),
    ]
    reply2 = await provider.complete(api_key=fake.api_key, system="sys", turns=turns, tools=[SPEC])
    assert reply2.text == "OK"
    assert fake.invalid == []
    assert len(fake.requests) == 2
    _ = ToolCall
