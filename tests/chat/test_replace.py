"""A turn that replaces the conversation's last answer (`replace: "lastAnswer"`, the page's
Regenerate) or its last user message (`replace: "lastMessage"`, the page's Edit): what is
stored afterwards and what the provider reads, now and in later turns."""

from __future__ import annotations

import httpx
import pytest

from controlcenter.chat.models import FAILED, ChatRun, ConversationRow, RunningMessage
from controlcenter.chat.run.stored import run_owner_status
from tests.chat.helpers import (
    CHAT,
    CONVERSATIONS,
    Llm,
    conversation_title,
    stream_chat,
    types,
    wait_for,
)
from tests.chat.test_resume import events_url, read_frames
from tests.conftest import AppUser, RunningServer
from tests.dbtools import reading, writing
from tests.fakes.llm import ErrorReply, Reply


async def turn(
    client: httpx.AsyncClient, user: AppUser, llm: Llm, **body: object
) -> list[dict[str, object]]:
    response, events = await stream_chat(client, user, {"provider": llm.name, **body})
    assert response.status_code == 200
    return events


async def stored(
    client: httpx.AsyncClient, user: AppUser, conversation_id: str
) -> list[tuple[str, str]]:
    got = await client.get(f"{CONVERSATIONS}/{conversation_id}", headers=user.headers)
    return [(m["role"], m["content"]) for m in got.json()["conversation"]["messages"]]


async def edit(
    client: httpx.AsyncClient, user: AppUser, llm: Llm, conversation_id: str, message: str
) -> list[dict[str, object]]:
    """A turn that replaces the conversation's last user message with `message` (Edit)."""
    return await turn(
        client, user, llm, message=message, conversationId=conversation_id, replace="lastMessage"
    )


async def new_conversation(client: httpx.AsyncClient, user: AppUser, llm: Llm, message: str) -> str:
    """A first turn with `message`; its conversation's id."""
    first = await turn(client, user, llm, message=message)
    return str(first[0]["conversationId"])


async def two_turns(client: httpx.AsyncClient, user: AppUser, llm: Llm) -> str:
    llm.fake.script(Reply(text="Dana is a tenant rep."), Reply(text="Her lease ends in May."))
    conversation_id = await new_conversation(client, user, llm, "Who is Dana?")
    await turn(
        client, user, llm, message="When does her lease end?", conversationId=conversation_id
    )
    return conversation_id


async def test_regenerate_replaces_the_last_answer_everywhere(
    client: httpx.AsyncClient, llm: Llm, user: AppUser
) -> None:
    conversation_id = await two_turns(client, user, llm)
    llm.fake.script(Reply(text="Her lease ends on 31 May."), Reply(text="Noted."))
    events = await turn(client, user, llm, conversationId=conversation_id, replace="lastAnswer")
    assert types(events) == ["message_start", "content_delta", "message_complete"]
    assert events[0]["conversationId"] == conversation_id
    # The provider read the history up to the last user message, without the old answer.
    assert llm.turns(llm.fake.requests[-1]) == [
        ("user", "Who is Dana?"),
        ("assistant", "Dana is a tenant rep."),
        ("user", "When does her lease end?"),
    ]
    assert await stored(client, user, conversation_id) == [
        ("user", "Who is Dana?"),
        ("assistant", "Dana is a tenant rep."),
        ("user", "When does her lease end?"),
        ("assistant", "Her lease ends on 31 May."),
    ]
    # A later turn never reads the replaced answer.
    await turn(client, user, llm, message="Thanks", conversationId=conversation_id)
    assert ("assistant", "Her lease ends in May.") not in llm.turns(llm.fake.requests[-1])
    assert ("assistant", "Her lease ends on 31 May.") in llm.turns(llm.fake.requests[-1])


async def test_edit_replaces_the_last_message_and_its_answer(
    client: httpx.AsyncClient, llm: Llm, user: AppUser
) -> None:
    conversation_id = await two_turns(client, user, llm)
    llm.fake.script(Reply(text="She has two leases."))
    await edit(client, user, llm, conversation_id, "How many leases does she have?")
    assert llm.turns(llm.fake.requests[-1]) == [
        ("user", "Who is Dana?"),
        ("assistant", "Dana is a tenant rep."),
        ("user", "How many leases does she have?"),
    ]
    assert await stored(client, user, conversation_id) == [
        ("user", "Who is Dana?"),
        ("assistant", "Dana is a tenant rep."),
        ("user", "How many leases does she have?"),
        ("assistant", "She has two leases."),
    ]


@pytest.mark.parametrize("llm", ["provider_a"], indirect=True)
async def test_regenerate_answers_a_message_whose_answer_failed(
    client: httpx.AsyncClient, server: RunningServer, llm: Llm, user: AppUser
) -> None:
    """The error reaches the client once the failed run's end is stored: a Regenerate sent
    the moment it arrives is never refused as "still running"."""
    llm.fake.script(ErrorReply(529, "Overloaded"))
    failed = await turn(client, user, llm, message="Show my pipeline")
    assert types(failed)[-1] == "error"
    status = await run_owner_status(server.db, str(failed[0]["messageId"]))
    assert status == (user.id, FAILED)
    conversation_id = str(failed[0]["conversationId"])
    llm.fake.script(Reply(text="Three deals."))
    again = await turn(client, user, llm, conversationId=conversation_id, replace="lastAnswer")
    assert types(again)[-1] == "message_complete"
    assert llm.turns(llm.fake.requests[-1]) == [("user", "Show my pipeline")]
    assert await stored(client, user, conversation_id) == [
        ("user", "Show my pipeline"),
        ("assistant", "Three deals."),
    ]


@pytest.mark.parametrize("llm", ["provider_a"], indirect=True)
async def test_editing_the_first_message_moves_a_title_taken_from_it(
    client: httpx.AsyncClient, llm: Llm, user: AppUser
) -> None:
    llm.fake.script(Reply(text="One."), Reply(text="Two."), Reply(text="Three."))
    conversation_id = await new_conversation(client, user, llm, "Who is Dna?")
    await edit(client, user, llm, conversation_id, "Who is Dana?")
    assert await conversation_title(client, user, conversation_id) == "Who is Dana?"
    # A title the user chose stays theirs.
    await client.patch(
        f"{CONVERSATIONS}/{conversation_id}", json={"title": "Dana"}, headers=user.headers
    )
    await edit(client, user, llm, conversation_id, "Who is Omar?")
    assert await conversation_title(client, user, conversation_id) == "Dana"
    assert await stored(client, user, conversation_id) == [
        ("user", "Who is Omar?"),
        ("assistant", "Three."),
    ]


@pytest.mark.parametrize("llm", ["provider_a"], indirect=True)
@pytest.mark.parametrize(
    ("body", "error"),
    [
        (
            {"replace": "everything", "message": "x"},
            "Invalid replace: must be one of lastAnswer, lastMessage",
        ),
        ({"replace": 1, "message": "x"}, "Invalid replace: must be one of lastAnswer, lastMessage"),
        ({"replace": "lastAnswer"}, "Missing conversationId: replace applies to a conversation"),
        (
            {"replace": "lastMessage", "message": "x"},
            "Missing conversationId: replace applies to a conversation",
        ),
        ({"replace": "lastMessage", "conversationId": "c1"}, "Missing or empty message"),
    ],
)
async def test_a_replace_that_cannot_apply_is_refused_before_the_stream(
    client: httpx.AsyncClient, llm: Llm, user: AppUser, body: dict[str, object], error: str
) -> None:
    refused = await client.post(CHAT, json=body, headers=user.headers)
    assert (refused.status_code, refused.json()) == (400, {"error": error})
    assert llm.fake.requests == []


@pytest.mark.parametrize("llm", ["provider_a"], indirect=True)
async def test_a_replace_in_another_users_or_an_unknown_conversation_finds_none(
    client: httpx.AsyncClient, llm: Llm, user: AppUser
) -> None:
    for conversation_id in ("missing", 5):
        events = await turn(client, user, llm, conversationId=conversation_id, replace="lastAnswer")
        assert events == [{"type": "error", "error": "Conversation not found"}]
    assert llm.fake.requests == []


@pytest.mark.parametrize("llm", ["provider_a"], indirect=True)
async def test_a_conversation_without_a_message_has_nothing_to_replace(
    client: httpx.AsyncClient, server: RunningServer, llm: Llm, user: AppUser
) -> None:
    async with writing(server.db) as session:
        conversation = ConversationRow(user_id=user.id, title="Empty")
        session.add(conversation)
        await session.flush()
        conversation_id = conversation.id
    for replace in ("lastAnswer", "lastMessage"):
        events = await turn(
            client, user, llm, message="Hello", conversationId=conversation_id, replace=replace
        )
        assert events == [
            {"type": "error", "error": "The conversation has no message to answer again"}
        ]
    assert await stored(client, user, conversation_id) == []
    assert llm.fake.requests == []


@pytest.mark.parametrize("llm", ["provider_a"], indirect=True)
async def test_a_replacing_answer_has_its_liveness_row_while_it_runs(
    client: httpx.AsyncClient, server: RunningServer, llm: Llm, user: AppUser
) -> None:
    """Written with its run, as any answer's: a process that dies during it leaves a row
    another process closes."""
    conversation_id = await two_turns(client, user, llm)
    llm.fake.script(Reply(text="slow", delay_s=30))
    body = {"conversationId": conversation_id, "provider": llm.name, "replace": "lastAnswer"}
    running = await read_frames(client, "POST", f"{CHAT}?ids=1", user, body=body, stop_after=1)
    message_id = running[0][1]["messageId"]
    async with reading(server.db) as session:
        row = await session.get(RunningMessage, message_id)
        run = await session.get(ChatRun, message_id)
    assert row is not None
    assert run is not None and run.conversation_id == conversation_id
    await client.post(f"{CHAT}/{message_id}/stop", headers=user.headers)
    await read_frames(client, "GET", events_url(message_id), user)


async def _true(value: bool) -> bool:
    return value


@pytest.mark.parametrize("llm", ["provider_a"], indirect=True)
async def test_nothing_is_replaced_while_an_answer_of_the_conversation_runs(
    client: httpx.AsyncClient, llm: Llm, user: AppUser
) -> None:
    llm.fake.script(Reply(text="First."), Reply(text="slow", delay_s=30))
    conversation_id = await new_conversation(client, user, llm, "Hello")
    body = {"message": "Still there?", "conversationId": conversation_id, "provider": llm.name}
    running = await read_frames(client, "POST", f"{CHAT}?ids=1", user, body=body, stop_after=1)
    message_id = running[0][1]["messageId"]
    await wait_for(lambda: _true(len(llm.fake.requests) == 2))  # the slow answer is asked
    for replace in ("lastAnswer", "lastMessage"):
        events = await turn(
            client, user, llm, message="Edited", conversationId=conversation_id, replace=replace
        )
        assert events == [
            {"type": "error", "error": "An answer is still running in this conversation"}
        ]
    assert await stored(client, user, conversation_id) == [
        ("user", "Hello"),
        ("assistant", "First."),
        ("user", "Still there?"),
    ]
    # Stopped, the answer is saved; then the conversation's last answer can be replaced.
    await client.post(f"{CHAT}/{message_id}/stop", headers=user.headers)
    await read_frames(client, "GET", events_url(message_id), user)
    llm.fake.script(Reply(text="Yes, here."))
    await turn(client, user, llm, conversationId=conversation_id, replace="lastAnswer")
    assert await stored(client, user, conversation_id) == [
        ("user", "Hello"),
        ("assistant", "First."),
        ("user", "Still there?"),
        ("assistant", "Yes, here."),
    ]
