"""The tools a chat offers and runs: the router's order and cut, the MCP server (up and down)."""

from __future__ import annotations

from typing import Any

import httpx

from tests.chat.conftest import ToolLog, recording_tool
from tests.chat.helpers import Llm, set_settings, stream_chat, types
from tests.conftest import AppUser, RunningServer
from tests.fakes.llm import Reply, ToolUse
from tests.fakes.mcp_server import FakeMcp


async def test_300_tools_are_offered_ordered_and_cut_at_128(
    client: httpx.AsyncClient, llm: Llm, user: AppUser, register_tools: Any, tool_log: ToolLog
) -> None:
    prefixes = ["zeta", "Contact", "misc", "EMAIL", "opportunityX", "alpha", "location"]
    names = [f"{prefixes[i % len(prefixes)]}_{i:03d}" for i in range(300)]
    register_tools([recording_tool(name, tool_log) for name in names])
    _, events = await stream_chat(client, user, {"message": "hi", "provider": llm.name})
    assert types(events)[-1] == "message_complete"
    offered = llm.offered_tools(llm.fake.requests[0])
    first = [
        n for n in names if n.lower().startswith(("contact", "email", "opportunity", "location"))
    ]
    rest = [n for n in names if n not in first]
    assert len(first) == 171
    assert offered == (first + rest)[:128]


async def test_mcp_tools_are_listed_and_called(
    client: httpx.AsyncClient,
    server: RunningServer,
    llm: Llm,
    user: AppUser,
    fake_mcp: FakeMcp,
) -> None:
    await set_settings(server, {"mcpServerUrl": fake_mcp.url}, user)
    llm.fake.script(
        Reply(
            text="Checking.",
            tool_uses=[
                ToolUse("lookup_listing", {"mls_number": "M-7"}, id="m1"),
                ToolUse("mls_search", {"city": "Austin"}, id="m2"),  # the sanitised name
                ToolUse("fail_always", {}, id="m3"),
            ],
        ),
        Reply(text=" Listing M-7 is active."),
    )
    _, events = await stream_chat(client, user, {"message": "M-7?", "provider": llm.name})
    offered = llm.offered_tools(llm.fake.requests[0])
    assert offered[0] == "contact_notes"  # a priority name comes first
    assert sorted(offered[1:]) == [
        "echo_text",
        "fail_always",
        "lookup_listing",
        "mls_search",
        "schedule_showing",
    ]
    calls = [e["toolCall"] for e in events if e["type"] == "tool_call_start"]
    assert calls == [
        {"id": "m1", "name": "lookup_listing", "arguments": {"mls_number": "M-7"}},
        {"id": "m2", "name": "mls.search", "arguments": {"city": "Austin"}},
        {"id": "m3", "name": "fail_always", "arguments": {}},
    ]
    results = [e["toolResult"] for e in events if e["type"] == "tool_result"]
    assert results == [
        {
            "toolCallId": "m1",
            "success": True,
            "result": {"mlsNumber": "M-7", "price": 1250000, "status": "active"},
        },
        {
            "toolCallId": "m2",
            "success": True,
            "result": {"result": ["Austin tower", "Austin plaza"]},
        },
        {
            "toolCallId": "m3",
            "success": False,
            "error": "Error executing tool fail_always: listing service unavailable",
        },
    ]
    assert fake_mcp.calls == [
        ("lookup_listing", {"mls_number": "M-7"}),
        ("mls.search", {"city": "Austin"}),
        ("fail_always", {"reason": ""}),
    ]
    assert events[-1]["message"]["content"] == "Checking. Listing M-7 is active."


async def test_an_mcp_server_that_is_down_never_fails_the_chat(
    client: httpx.AsyncClient,
    server: RunningServer,
    llm: Llm,
    user: AppUser,
    dead_url: str,
    register_tools: Any,
    tool_log: ToolLog,
) -> None:
    register_tools([recording_tool("contact_search", tool_log)])
    await set_settings(server, {"mcpServerUrl": dead_url}, user)
    llm.fake.script(Reply(text="Still here."))
    _, events = await stream_chat(client, user, {"message": "hi", "provider": llm.name})
    assert types(events) == ["message_start", "content_delta", "message_complete"]
    assert llm.offered_tools(llm.fake.requests[0]) == ["contact_search"]
