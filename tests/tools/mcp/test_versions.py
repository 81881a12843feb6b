"""The MCP client against servers of both protocol eras: a server of the `mcp` package's 1.x
line speaking 2025-06-18 (the initialize handshake; tests/fakes/mcp_v1_server.py, run from the
environment scripts/ensure-mcp1.sh makes) and the 2.x line's speaking 2026-07-28 (stateless
requests after `server/discover`; tests/fakes/mcp_server.py)."""

from __future__ import annotations

from mcp import Client

from controlcenter.llm.types import ToolInvocation
from controlcenter.tools.base import ToolContext
from controlcenter.tools.mcp.server import McpServer
from controlcenter.tools.mcp.source import McpSource
from controlcenter.tools.router import ToolRouter
from tests.fakes.mcp_server import FakeMcp
from tests.tools.mcp.test_servers import Servers

CONTEXT = ToolContext(user_id="u1", crm=None, settings={})


async def negotiated(url: str) -> str:
    async with Client(url, cache=None) as client:
        return client.protocol_version


async def use(url: str) -> tuple[list[tuple[str, str | None, bool]], object]:
    source = McpSource(lambda: _none(), ttl_s=30, timeout_s=10, stored=Servers(McpServer("S", url)))
    try:
        tools = await source.list_tools({})
        box = await ToolRouter([source]).toolbox({})
        call = ToolInvocation("c1", "lookup_listing", {"mls_number": "A1"})
        outcome = await box.execute(call, CONTEXT)
    finally:
        await source.aclose()
    assert outcome.success, outcome.error
    return [(t.name, t.title, t.read_only) for t in tools], outcome.result


async def _none() -> str | None:
    return None


async def test_a_server_of_the_handshake_era_works(v1_url: str) -> None:
    assert await negotiated(v1_url) == "2025-06-18"
    tools, result = await use(v1_url)
    assert tools == [("lookup_listing", "Look up listing", True)]
    assert result == {"mlsNumber": "A1", "protocol": "2025-06-18"}


async def test_a_server_of_the_stateless_era_works(fake_mcp: FakeMcp) -> None:
    assert await negotiated(fake_mcp.url) == "2026-07-28"
    tools, result = await use(fake_mcp.url)
    assert ("lookup_listing", None, True) in tools
    assert result == {"mlsNumber": "A1", "price": 1250000, "status": "active"}
    assert "server/discover" in fake_mcp.methods
    assert "initialize" not in fake_mcp.methods
