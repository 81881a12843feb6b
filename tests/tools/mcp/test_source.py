"""The MCP source against a real MCP server on 127.0.0.1 (tests/fakes/mcp_server.py)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from controlcenter.llm.types import ToolInvocation
from controlcenter.tools.base import ToolContext, ToolError
from controlcenter.tools.mcp.source import McpSource
from controlcenter.tools.router import StaticSource, ToolRouter
from tests.fakes.mcp_server import FakeMcp
from tests.tools.test_router import make_tool

CONTEXT = ToolContext(user_id="u1", crm=None)
OPENED: list[McpSource] = []


@pytest.fixture(autouse=True)
async def _close_sources() -> AsyncIterator[None]:
    """Each source made by a test is closed after it, its connection pool with it."""
    yield
    while OPENED:
        await OPENED.pop().aclose()


def source_for(url: str | None, ttl_s: float = 30.0, timeout_s: float = 5.0) -> McpSource:
    async def server_url() -> str | None:
        return url

    source = McpSource(server_url, ttl_s=ttl_s, timeout_s=timeout_s)
    OPENED.append(source)
    return source


async def test_lists_the_servers_tools_with_their_schemas(fake_mcp: FakeMcp) -> None:
    tools = await source_for(fake_mcp.url).list_tools()
    by_name = {t.name: t for t in tools}
    assert set(by_name) == {
        "lookup_listing",
        "echo_text",
        "fail_always",
        "mls.search",
        "contact_notes",
        "schedule_showing",
    }
    lookup = by_name["lookup_listing"]
    assert lookup.description == "Look up a listing by its MLS number."
    assert lookup.input_schema["required"] == ["mls_number"]
    assert lookup.input_schema["properties"]["mls_number"]["type"] == "string"


async def test_calls_return_structured_results_and_errors(fake_mcp: FakeMcp) -> None:
    box = await ToolRouter([source_for(fake_mcp.url)]).toolbox()
    ok = await box.execute(ToolInvocation("c1", "lookup_listing", {"mls_number": "A1"}), CONTEXT)
    assert ok.to_json() == {
        "toolCallId": "c1",
        "success": True,
        "result": {"mlsNumber": "A1", "price": 1250000, "status": "active"},
    }
    failed = await box.execute(ToolInvocation("c2", "fail_always", {"reason": "today"}), CONTEXT)
    assert failed.success is False
    assert failed.error == "Error executing tool fail_always: listing service unavailable today"
    # Checked against the listed schema before the server is asked.
    invalid = await box.execute(ToolInvocation("c3", "mls_search", {"city": 3}), CONTEXT)
    assert invalid.error == "Invalid arguments: 3 is not of type 'string' (at city)"
    # The dotted name is offered sanitised and called by its real name.
    found = await box.execute(ToolInvocation("c4", "mls_search", {"city": "Austin"}), CONTEXT)
    assert found.result == {"result": ["Austin tower", "Austin plaza"]}  # the server wraps lists
    assert fake_mcp.calls == [
        ("lookup_listing", {"mls_number": "A1"}),
        ("fail_always", {"reason": "today"}),
        ("mls.search", {"city": "Austin"}),
    ]


async def test_calls_share_one_session_and_close_with_the_source(fake_mcp: FakeMcp) -> None:
    source = source_for(fake_mcp.url)
    tools = {t.name: t for t in await source.list_tools()}
    echo = tools["echo_text"].handler
    results = await asyncio.gather(*(echo({"text": str(i)}, CONTEXT) for i in range(10)))
    assert results == [{"result": f"echo: {i}"} for i in range(10)]
    assert await echo({"text": "again"}, CONTEXT) == {"result": "echo: again"}
    assert len(fake_mcp.calls) == 11
    # One connection set-up (a discover probe or an initialize handshake) for all of them.
    setup = [m for m in fake_mcp.methods if m != "tools/call"]
    assert fake_mcp.methods.count("tools/call") == 11
    assert setup.count("tools/list") == 1
    assert len(setup) <= 3, setup
    await source.aclose()
    with pytest.raises(ToolError, match=r"^MCP server error: RuntimeError: the MCP source is cl"):
        await echo({"text": "late"}, CONTEXT)


async def test_the_list_is_cached_per_url_for_the_ttl(fake_mcp: FakeMcp) -> None:
    source = source_for(fake_mcp.url, ttl_s=0.3)
    first = await source.list_tools()
    assert await source.list_tools() is first
    assert fake_mcp.methods.count("tools/list") == 1
    await asyncio.sleep(0.35)
    again = await source.list_tools()
    assert fake_mcp.methods.count("tools/list") == 2  # asked again after the TTL
    # The same list: the same objects, so the toolbox and request-body memos keep holding.
    assert again is first


async def test_a_changed_list_is_seen_after_the_ttl(fake_mcp: FakeMcp) -> None:
    assert fake_mcp.app is not None
    echo = fake_mcp.app._tool_manager.get_tool("echo_text")
    assert echo is not None
    source = source_for(fake_mcp.url, ttl_s=0.3)
    first = await source.list_tools()
    before = echo.description
    echo.description = "Echo the text back, louder."
    try:
        await asyncio.sleep(0.35)
        again = await source.list_tools()
    finally:
        echo.description = before
    assert again is not first
    described = {t.name: t.description for t in again}
    assert described["echo_text"] == "Echo the text back, louder."
    assert [t.name for t in again] == [t.name for t in first]
    assert await source.list_tools() is again


async def test_concurrent_chats_share_one_refresh(fake_mcp: FakeMcp) -> None:
    source = source_for(fake_mcp.url)
    lists = await asyncio.gather(*(source.list_tools() for _ in range(20)))
    assert all(result is lists[0] for result in lists)


async def test_a_server_that_is_down_means_no_mcp_tools(dead_url: str) -> None:
    builtin = make_tool("contact_search")
    router = ToolRouter([StaticSource([builtin]), source_for(dead_url)])
    box = await router.toolbox()
    assert [s.name for s in box.specs] == ["contact_search"]


async def test_unset_url_lists_nothing_without_connecting() -> None:
    assert await source_for(None).list_tools() == ()
    assert await source_for("   ").list_tools() == ()


async def test_a_call_to_a_server_gone_down_is_a_tool_error(
    fake_mcp: FakeMcp, dead_url: str
) -> None:
    urls = [fake_mcp.url]

    async def server_url() -> str | None:
        return urls[0]

    source = McpSource(server_url, ttl_s=30, timeout_s=5)
    OPENED.append(source)
    tools = {t.name: t for t in await source.list_tools()}
    urls[0] = dead_url
    with pytest.raises(ToolError, match=r"^MCP server error: cannot connect to the server$"):
        await tools["echo_text"].handler({"text": "hi"}, CONTEXT)
