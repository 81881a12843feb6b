"""GET list, GET one, DELETE: the caller's own conversations only."""

from __future__ import annotations

import httpx
import pytest

from tests.chat.helpers import CONVERSATIONS, ISO, Llm, count_rows, stream_chat
from tests.conftest import AppUser, RunningServer, UserFactory
from tests.fakes.llm import Reply, ToolUse


async def start(client: httpx.AsyncClient, user: AppUser, llm: Llm, message: str) -> str:
    _, events = await stream_chat(client, user, {"message": message, "provider": llm.name})
    return str(events[0]["conversationId"])


@pytest.mark.parametrize("llm", ["provider_a"], indirect=True)
async def test_list_get_and_delete(
    client: httpx.AsyncClient,
    server: RunningServer,
    users: UserFactory,
    llm: Llm,
    user: AppUser,
) -> None:
    llm.fake.script(
        Reply(text="first answer"),
        Reply(tool_uses=[ToolUse("unknown_tool", {"a": 1}, id="u1")]),
        Reply(text="second answer"),
    )
    first = await start(client, user, llm, "First question")
    second = await start(client, user, llm, "Second question")
    other_user = await users.create()

    listed = await client.get(CONVERSATIONS, headers=user.headers)
    assert listed.status_code == 200
    conversations = listed.json()["conversations"]
    assert [c["id"] for c in conversations] == [second, first]  # newest first
    assert [c["title"] for c in conversations] == ["Second question", "First question"]
    for item in conversations:
        assert set(item) == {"id", "title", "createdAt", "updatedAt"}
        assert ISO.match(item["createdAt"]) and ISO.match(item["updatedAt"])
    assert listed.json()["nextCursor"] is None
    assert (await client.get(CONVERSATIONS, headers=other_user.headers)).json() == {
        "conversations": [],
        "nextCursor": None,
    }

    got = await client.get(f"{CONVERSATIONS}/{second}", headers=user.headers)
    assert got.status_code == 200
    conversation = got.json()["conversation"]
    assert {k: conversation[k] for k in ("id", "title")} == {
        "id": second,
        "title": "Second question",
    }
    messages = conversation["messages"]
    assert [(m["role"], m["content"]) for m in messages] == [
        ("user", "Second question"),
        ("assistant", "second answer"),
    ]
    assert set(messages[0]) == {"id", "role", "content", "createdAt"}
    assert messages[1]["toolCalls"] == [{"id": "u1", "name": "unknown_tool", "arguments": {"a": 1}}]
    assert messages[1]["toolResults"] == [
        {"toolCallId": "u1", "success": False, "error": "Unknown tool: unknown_tool"}
    ]

    for method in ("GET", "DELETE"):
        for who, conversation_id in [(other_user, second), (user, "missing")]:
            response = await client.request(
                method, f"{CONVERSATIONS}/{conversation_id}", headers=who.headers
            )
            assert response.status_code == 404
            assert response.headers["content-type"] == "application/json"
            assert response.json() == {"error": "Conversation not found"}
    assert await count_rows(server) == (2, 4)

    deleted = await client.delete(f"{CONVERSATIONS}/{second}", headers=user.headers)
    assert (deleted.status_code, deleted.json()) == (200, {"success": True})
    assert await count_rows(server) == (1, 2)  # its messages went with it
    gone = await client.get(f"{CONVERSATIONS}/{second}", headers=user.headers)
    assert gone.status_code == 404
    assert [
        c["id"]
        for c in (await client.get(CONVERSATIONS, headers=user.headers)).json()["conversations"]
    ] == [first]


async def test_conversation_endpoints_need_a_session(client: httpx.AsyncClient) -> None:
    for method, path in [
        ("GET", CONVERSATIONS),
        ("GET", f"{CONVERSATIONS}/x"),
        ("DELETE", f"{CONVERSATIONS}/x"),
    ]:
        response = await client.request(method, path)
        assert (response.status_code, response.json()) == (401, {"error": "Unauthorized"})
