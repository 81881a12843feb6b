"""A shared MCP session that stops working between calls: a session the server has forgotten
is opened anew and the call made on it, once; a call whose connection is lost after the server
received it is never made again (the server may have run it), and the next call opens a new
session; a listing whose connection is lost is made again on a new session.

The servers are behind a proxy on 127.0.0.1 that passes everything through, noting the
JSON-RPC method of each request it passes on, until it is told to meet the next `tools/call`
or `tools/list` one way or the other."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Literal
from urllib.parse import urlsplit

import pytest

from controlcenter.tools.base import Tool, ToolContext, ToolError
from controlcenter.tools.mcp.source import McpSource
from tests.fakes.mcp_server import FakeMcp

CONTEXT = ToolContext(user_id="u1", crm=None)
_METHOD = re.compile(rb'"method":\s*"([^"]+)"')
_SESSION_ID = re.compile(rb"(?im)^(mcp-session-id:)[^\r\n]*")


@dataclass
class Proxy:
    url: str
    # How the next request of the method is met: "forget" passes it on with a session id the
    # server does not know, as after the server forgot the session (it answers as it does
    # then); "drop" passes it on and closes the connection once the server answers, the
    # answer unsent.
    meet: tuple[str, Literal["forget", "drop"]] | None = None
    methods: list[str] = field(default_factory=list)  # of the requests passed on
    # Set: a dropped request's connection is closed only once this is set (the server's
    # answer held until then).
    hold_drop: asyncio.Event | None = None
    dropping: asyncio.Event = field(default_factory=asyncio.Event)  # one was passed on


@asynccontextmanager
async def proxy_to(url: str) -> AsyncIterator[Proxy]:
    target = urlsplit(url)

    async def serve(client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        up_r, up_w = await asyncio.open_connection(target.hostname, target.port)
        dropping = asyncio.Event()

        async def to_server() -> None:
            while data := await client_r.read(65536):
                methods = [m.decode() for m in _METHOD.findall(data)]
                way = proxy.meet[1] if proxy.meet and proxy.meet[0] in methods else None
                if way is not None:
                    proxy.meet = None
                if way == "forget":
                    data = _SESSION_ID.sub(rb"\1 forgotten-session", data)
                    methods = []  # it runs nothing at the server
                proxy.methods += methods
                up_w.write(data)
                await up_w.drain()
                if way == "drop":
                    dropping.set()
                    proxy.dropping.set()
                    return

        async def to_client() -> None:
            while data := await up_r.read(65536):
                if dropping.is_set():
                    if proxy.hold_drop is not None:
                        await proxy.hold_drop.wait()
                    client_w.transport.abort()
                    return
                client_w.write(data)
                await client_w.drain()
            client_w.close()

        await asyncio.gather(to_server(), to_client(), return_exceptions=True)
        up_w.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    proxy = Proxy(f"http://127.0.0.1:{port}{target.path}")
    try:
        yield proxy
    finally:
        server.close()


@asynccontextmanager
async def tools_through(url: str) -> AsyncIterator[tuple[Proxy, McpSource, dict[str, Tool]]]:
    """The proxy to `url`, a source of its tools, and the tools it listed (its session open)."""
    async with proxy_to(url) as proxy:

        async def server_url() -> str | None:
            return proxy.url

        source = McpSource(server_url, ttl_s=30, timeout_s=5)
        try:
            yield proxy, source, {t.name: t for t in await source.list_tools()}
        finally:
            await source.aclose()


async def test_a_forgotten_session_is_opened_again_and_the_call_made_once(v1_url: str) -> None:
    async with tools_through(v1_url) as (proxy, _, tools):
        assert proxy.methods.count("initialize") == 1
        proxy.meet = ("tools/call", "forget")
        result = await tools["lookup_listing"].handler({"mls_number": "A1"}, CONTEXT)
        assert result == {"mlsNumber": "A1", "protocol": "2025-06-18"}
        assert proxy.methods.count("initialize") == 2  # a new session
        assert proxy.methods.count("tools/call") == 1


async def test_a_call_lost_is_not_made_again_even_once_the_session_is_forgotten(
    v1_url: str,
) -> None:
    """The server restarts: a call's connection closes after the server received it, and
    before its failure is handled another request of the session meets the new server, which
    answers 404. The lost call may have run; it is not made again on the new session."""
    async with tools_through(v1_url) as (proxy, source, tools):
        server = await source.setting_server()
        assert server is not None
        proxy.hold_drop = asyncio.Event()
        proxy.meet = ("tools/call", "drop")
        lookup = tools["lookup_listing"].handler

        async def call_lookup() -> object:
            return await lookup({"mls_number": "A1"}, CONTEXT)

        call = asyncio.create_task(call_lookup())
        await proxy.dropping.wait()  # the server has the call
        proxy.meet = ("tools/list", "forget")
        await source.list_now(server, None)  # a 404, then a new session
        proxy.hold_drop.set()
        with pytest.raises(ToolError, match=r"^MCP server error: connection lost$"):
            await call
        assert proxy.methods.count("tools/call") == 1


async def test_a_call_lost_after_the_server_received_it_is_not_made_again(
    fake_mcp: FakeMcp,
) -> None:
    async with tools_through(fake_mcp.url) as (proxy, _, tools):
        echo = tools["echo_text"].handler
        fake_mcp.reset()
        proxy.meet = ("tools/call", "drop")
        with pytest.raises(ToolError, match=r"^MCP server error: connection lost$"):
            await echo({"text": "once"}, CONTEXT)
        assert fake_mcp.calls == [("echo_text", {"text": "once"})]
        # The session is of no more use: the next call opens a new one.
        assert await echo({"text": "next"}, CONTEXT) == {"result": "echo: next"}
        assert fake_mcp.calls[1:] == [("echo_text", {"text": "next"})]


async def test_a_listing_lost_after_the_server_received_it_is_made_again(
    fake_mcp: FakeMcp,
) -> None:
    async with tools_through(fake_mcp.url) as (proxy, source, tools):
        server = await source.setting_server()
        assert server is not None
        proxy.meet = ("tools/list", "drop")
        again = await source.list_now(server, None)
        assert [t.name for t in again] == list(tools)
        assert proxy.methods.count("tools/list") == 3  # the first listing, the lost, the new
