"""Approval of writes: which tools write (the built-in catalogue, decided in one
place; MCP tools by their `readOnlyHint`), the approval event, approve, deny and the timeout."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

import httpx
import pytest
from httpx_sse import aconnect_sse

from controlcenter.crm.tools import crm_tools
from controlcenter.crm.tools.access import READS, WRITES
from controlcenter.tools.base import Tool, ToolContext
from controlcenter.tools.mcp.source import McpSource
from tests.chat.helpers import CHAT, Llm, types
from tests.chat.test_resume import Frame, events_url, read_frames
from tests.conftest import AppUser, RunningServer, UserFactory
from tests.fakes.llm import Reply, ToolUse
from tests.fakes.mcp_server import FakeMcp

POLICY = "/api/v1/admin/chat-policy"
WRITE_VERBS = re.compile(r"_(create|update|upsert|send|delete|add|remove)-")


def test_every_builtin_crm_tool_is_a_read_or_a_write() -> None:
    tools = crm_tools()
    names = {tool.name for tool in tools}
    assert names == READS | WRITES and not READS & WRITES
    for tool in tools:
        assert tool.read_only == (tool.name in READS)
        # The rule the lists follow: creating, updating, sending or deleting writes.
        assert bool(WRITE_VERBS.search(tool.name)) == (tool.name in WRITES), tool.name


async def test_mcp_tools_follow_their_read_only_hint(fake_mcp: FakeMcp) -> None:
    async def url() -> str:
        return fake_mcp.url

    source = McpSource(url, ttl_s=30, timeout_s=10)
    try:
        listed = {tool.name: tool.read_only for tool in await source.list_tools()}
    finally:
        await source.aclose()
    assert listed["lookup_listing"] is True  # readOnlyHint: true
    assert listed["echo_text"] is False  # readOnlyHint: false
    assert listed["contact_notes"] is False  # no hint: a write


def tools(calls: list[str], release: asyncio.Event | None = None) -> list[Tool]:
    async def read(arguments: dict[str, Any], context: ToolContext) -> Any:
        calls.append("contact_search")
        return {"found": 1}

    async def write(arguments: dict[str, Any], context: ToolContext) -> Any:
        calls.append("contact_update")
        return {"updated": True}

    schema = {"type": "object", "properties": {"q": {"type": "string"}}}
    return [
        Tool("contact_search", "Search.", schema, read, read_only=True),
        Tool("contact_update", "Update.", schema, write),
    ]


@pytest.fixture
async def approving(client: httpx.AsyncClient, users: UserFactory) -> None:
    boss = await users.create("super_admin")
    answer = await client.put(POLICY, json={"toolApproval": "writes"}, headers=boss.headers)
    assert answer.status_code == 200


@pytest.fixture
def approval_timeout(server: RunningServer) -> Iterator[Callable[[float], None]]:
    """Sets how long the service waits for an answer (the policy's 10 minutes otherwise)."""
    kept = server.chat

    def set_to(seconds: float) -> None:
        server.app.state.chat = replace(kept, approval_timeout_s=seconds)

    yield set_to
    server.app.state.chat = kept


async def start_until_approval(
    client: httpx.AsyncClient, llm: Llm, user: AppUser
) -> tuple[str, list[Frame]]:
    llm.fake.script(
        Reply(
            text="On it.",
            tool_uses=[
                ToolUse("contact_search", {"q": "a"}, id="call_r"),
                ToolUse("contact_update", {"q": "b"}, id="call_w"),
            ],
        ),
        Reply(text="Finished."),
    )
    body = {"message": "update", "provider": llm.name}
    frames = await read_frames(client, "POST", f"{CHAT}?ids=1", user, body=body, stop_after=6)
    assert types([e for _, e in frames]) == [
        "message_start",
        "content_delta",
        "tool_call_start",
        "tool_result",
        "tool_call_start",
        "tool_approval_required",
    ]
    assert frames[-1][1]["toolCall"] == {
        "id": "call_w",
        "name": "contact_update",
        "arguments": {"q": "b"},
    }
    return frames[0][1]["messageId"], frames


def decide(message_id: str, call_id: str, answer: str) -> str:
    return f"{CHAT}/{message_id}/tool-calls/{call_id}/{answer}"


async def test_an_approved_write_runs(
    client: httpx.AsyncClient, llm: Llm, user: AppUser, register_tools: Any, approving: None
) -> None:
    calls: list[str] = []
    register_tools(tools(calls))
    message_id, _ = await start_until_approval(client, llm, user)
    assert calls == ["contact_search"]  # the read ran without asking; the write waits
    answer = await client.post(decide(message_id, "call_w", "approve"), headers=user.headers)
    assert (answer.status_code, answer.json()) == (200, {"success": True})
    rest = await read_frames(client, "GET", f"{events_url(message_id)}?after=6", user)
    events = [e for _, e in rest]
    assert types(events) == ["tool_result", "content_delta", "message_complete"]
    assert events[0]["toolResult"]["success"] is True
    assert calls == ["contact_search", "contact_update"]
    again = await client.post(decide(message_id, "call_w", "deny"), headers=user.headers)
    assert (again.status_code, again.json()) == (409, {"error": "Not waiting for approval"})


async def test_a_denied_write_does_not_run_and_the_model_reads_why(
    client: httpx.AsyncClient,
    llm: Llm,
    user: AppUser,
    users: UserFactory,
    register_tools: Any,
    approving: None,
) -> None:
    calls: list[str] = []
    register_tools(tools(calls))
    message_id, _ = await start_until_approval(client, llm, user)
    other = await users.create()
    for who, call_id in ((other, "call_w"), (user, "call_nope"), (user, "call_r")):
        answer = await client.post(decide(message_id, call_id, "deny"), headers=who.headers)
        assert (answer.status_code, answer.json()) == (404, {"error": "Tool call not found"})
    answer = await client.post(decide(message_id, "call_w", "deny"), headers=user.headers)
    assert answer.status_code == 200
    rest = await read_frames(client, "GET", f"{events_url(message_id)}?after=6", user)
    result = rest[0][1]["toolResult"]
    assert result == {"toolCallId": "call_w", "success": False, "error": "Denied by the user"}
    assert calls == ["contact_search"]
    assert "Denied by the user" in str(llm.fake.requests[-1]["messages"])


async def test_no_answer_in_time_is_a_denial(
    client: httpx.AsyncClient,
    llm: Llm,
    user: AppUser,
    register_tools: Any,
    approving: None,
    approval_timeout: Any,
) -> None:
    approval_timeout(0.3)
    calls: list[str] = []
    register_tools(tools(calls))
    message_id, _ = await start_until_approval(client, llm, user)
    rest = await read_frames(client, "GET", f"{events_url(message_id)}?after=6", user)
    assert rest[0][1]["toolResult"]["error"] == "Denied by the user"
    assert rest[-1][1]["type"] == "message_complete"
    assert calls == ["contact_search"]
    late = await client.post(decide(message_id, "call_w", "approve"), headers=user.headers)
    assert late.status_code == 409


async def test_without_the_policy_writes_run_at_once(
    client: httpx.AsyncClient, llm: Llm, user: AppUser, register_tools: Any
) -> None:
    calls: list[str] = []
    register_tools(tools(calls))
    llm.fake.script(
        Reply(tool_uses=[ToolUse("contact_update", {"q": "b"}, id="call_w")]), Reply(text="ok")
    )
    frames = await read_frames(
        client, "POST", CHAT, user, body={"message": "go", "provider": llm.name}
    )
    assert "tool_approval_required" not in types([e for _, e in frames])
    assert calls == ["contact_update"]


# Enough rounds for the answer to meet each moment of the wait's start at least once.
EAGER_ROUNDS = 25


async def test_an_answer_sent_the_moment_the_approval_event_arrives_is_never_missed(
    client: httpx.AsyncClient,
    llm: Llm,
    user: AppUser,
    register_tools: Any,
    approving: None,
    approval_timeout: Any,
) -> None:
    """The client approves as soon as it reads `tool_approval_required`, before the chat may
    have started waiting: the answer is taken (200) and the write runs. A lost or unheard
    answer would be a 404 here, or a denial once the (shortened) timeout passes."""
    approval_timeout(10.0)
    calls: list[str] = []
    register_tools(tools(calls))
    for n in range(EAGER_ROUNDS):
        call_id = f"call_{n}"
        llm.fake.script(
            Reply(tool_uses=[ToolUse("contact_update", {"q": "b"}, id=call_id)]),
            Reply(text="Done."),
        )
        body = {"message": f"update {n}", "provider": llm.name}
        seen: list[dict[str, Any]] = []
        async with aconnect_sse(client, "POST", CHAT, json=body, headers=user.headers) as source:
            async for sse in source.aiter_sse():
                event = json.loads(sse.data)
                seen.append(event)
                if event["type"] == "tool_approval_required":
                    message_id = seen[0]["messageId"]
                    answer = await client.post(
                        decide(message_id, call_id, "approve"), headers=user.headers
                    )
                    assert (n, answer.status_code) == (n, 200)
        results = [e["toolResult"] for e in seen if e["type"] == "tool_result"]
        assert results == [{"toolCallId": call_id, "success": True, "result": {"updated": True}}]
        assert seen[-1]["type"] == "message_complete"
    assert calls == ["contact_update"] * EAGER_ROUNDS
