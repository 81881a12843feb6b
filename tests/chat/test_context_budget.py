"""The context budget: the history is cut to `contextTokenBudget`, oldest turns
first, a tool call never separated from its result, the new message always sent; a
500-message conversation still gets answers from the strict fakes (which refuse a prompt
longer than the model's window)."""

from __future__ import annotations

import json
from datetime import timedelta

import httpx

from controlcenter.chat.context_budget import estimate, fit
from controlcenter.chat.models import ConversationRow, Message
from controlcenter.chat.run.start import new_message_id
from controlcenter.db import utcnow
from controlcenter.llm.types import (
    AssistantTurn,
    ToolInvocation,
    ToolOutcome,
    ToolResultsTurn,
    Turn,
    UserTurn,
)
from tests.chat.helpers import Llm, stream_chat, types
from tests.conftest import AppUser, RunningServer, UserFactory
from tests.dbtools import writing
from tests.fakes.llm import Reply

POLICY = "/api/v1/admin/chat-policy"


def test_the_oldest_turns_go_first_and_a_call_keeps_its_result() -> None:
    call = ToolInvocation("call_1", "contact_search", {"q": "x" * 40})
    history: list[Turn] = [
        UserTurn("u" * 400),
        AssistantTurn("a" * 400),
        UserTurn("find"),
        AssistantTurn("", (call,)),
        ToolResultsTurn((ToolOutcome("call_1", True, result={"r": "y" * 200}),)),
        AssistantTurn("found"),
    ]
    new: list[Turn] = [UserTurn("and now?")]
    assert fit(history, new, 10**6) == [*history, *new]
    # Room for the last units but not for the oldest pair.
    tail = history[2:]
    budget = sum(estimate(t) for t in [*tail, *new])
    assert fit(history, new, budget) == [*tail, *new]
    # One token less: the tool call and its result leave together, and an assistant turn left
    # at the front goes too (the APIs want a user turn first).
    assert fit(history, new, budget - 1) == new
    # Over budget on its own, the new message is still sent.
    assert fit(history, [UserTurn("z" * 10_000)], 10) == [UserTurn("z" * 10_000)]
    for budget in range(0, 600, 7):  # whatever the budget, no result without its call
        sent = fit(history, new, budget)
        for index, turn in enumerate(sent):
            if isinstance(turn, ToolResultsTurn):
                before = sent[index - 1]
                assert isinstance(before, AssistantTurn) and before.tool_calls
        assert isinstance(sent[0], UserTurn)


async def long_conversation(server: RunningServer, user: AppUser, count: int) -> str:
    """`count` stored messages of about 600 tokens each, user and assistant in turn."""
    start = utcnow() - timedelta(days=1)
    async with writing(server.db) as db:
        conversation = ConversationRow(user_id=user.id, title="long")
        db.add(conversation)
        await db.flush()
        for index in range(count):
            role = "user" if index % 2 == 0 else "assistant"
            db.add(
                Message(
                    id=new_message_id(),
                    conversation_id=conversation.id,
                    role=role,
                    content=f"{index:03d} " + "word " * 480,
                    created_at=start + timedelta(seconds=index),
                )
            )
        return conversation.id


async def test_a_500_message_conversation_still_gets_answers(
    client: httpx.AsyncClient, server: RunningServer, llm: Llm, user: AppUser, users: UserFactory
) -> None:
    conversation_id = await long_conversation(server, user, 500)
    body = {
        "message": "What did we say last?",
        "conversationId": conversation_id,
        "provider": llm.name,
    }
    llm.fake.script(Reply(text="Plenty."))
    _, events = await stream_chat(client, user, body)
    assert types(events) == ["message_start", "content_delta", "message_complete"]
    request = llm.fake.requests[-1]
    turns = llm.turns(request)
    assert turns[-1] == ("user", "What did we say last?")
    assert turns[0][0] == "user"
    # The newest history is kept, the oldest cut, within the default budget of 100,000.
    assert turns[-2][1].startswith("499 ") and not any(t.startswith("000 ") for _, t in turns)
    assert 100 < len(turns) < 200
    assert len(json.dumps(request["messages"])) // 4 <= 100_000 + 5_000

    # Without the cut (a budget past the model's window) the strict fake refuses the request.
    boss = await users.create("super_admin")
    answer = await client.put(POLICY, json={"contextTokenBudget": 10**9}, headers=boss.headers)
    assert answer.status_code == 200
    _, events = await stream_chat(client, user, body)
    assert events[-1]["type"] == "error" and events[-1]["code"] == "400"
    assert "too long" in events[-1]["error"] or "context length" in events[-1]["error"]
    llm.fake.invalid.clear()
    # A smaller budget sends less.
    await client.put(POLICY, json={"contextTokenBudget": 5_000}, headers=boss.headers)
    llm.fake.script(Reply(text="Short."))
    _, events = await stream_chat(client, user, body)
    assert events[-1]["type"] == "message_complete"
    assert len(llm.turns(llm.fake.requests[-1])) < 20
