"""Several MCP servers at once, with credentials and per-broker headers, against real MCP servers
on 127.0.0.1: the stand-in for HighLevel's (tests/fakes/highlevel_mcp.py) and the listings one
(tests/fakes/mcp_server.py)."""

from __future__ import annotations

from collections.abc import Sequence

import httpx
from structlog.testing import capture_logs

from controlcenter.llm.types import ToolInvocation
from controlcenter.tools.base import ToolContext
from controlcenter.tools.mcp.server import McpServer
from controlcenter.tools.mcp.source import McpSource
from controlcenter.tools.mcp.status import server_states, summary
from controlcenter.tools.mcp.store import StoredServer
from controlcenter.tools.router import StaticSource, ToolRouter
from tests.fakes.highlevel_mcp import TOKEN, TOOLS, FakeHighLevelMcp
from tests.fakes.mcp_server import FakeMcp
from tests.tools.test_router import make_tool

LOCATION = {"locationId": "{crmLocationId}"}


class Servers:
    """Stored servers without a database (the store's protocol)."""

    def __init__(self, *servers: McpServer, disabled: Sequence[McpServer] = ()) -> None:
        self.servers = list(servers)
        self.disabled = list(disabled)
        self.reads: list[str] = []  # which of the store's reads were asked for, in order

    async def enabled(self) -> Sequence[McpServer]:
        self.reads.append("enabled")
        return self.servers

    async def all(self) -> Sequence[StoredServer]:
        self.reads.append("all")
        from datetime import UTC, datetime

        now = datetime.now(UTC)
        on = [StoredServer(s.name, True, s, now, now) for s in self.servers]
        return on + [StoredServer(s.name, False, s, now, now) for s in self.disabled]


def highlevel(fake: FakeHighLevelMcp, **changes: object) -> McpServer:
    fields: dict[str, object] = {
        "name": "HighLevel",
        "url": fake.url,
        "bearer_token": TOKEN,
        "headers": tuple(LOCATION.items()),
    }
    fields.update(changes)
    return McpServer(**fields)  # type: ignore[arg-type]


def source(*servers: McpServer, url: str | None = None, ttl_s: float = 30.0) -> McpSource:
    async def server_url() -> str | None:
        return url

    return McpSource(server_url, ttl_s=ttl_s, timeout_s=5.0, stored=Servers(*servers))


def context(location: str | None) -> ToolContext:
    return ToolContext(user_id="u1", crm=None, settings={}, location_id=location)


async def test_the_fake_refuses_without_the_token_or_the_location(
    fake_highlevel: FakeHighLevelMcp,
) -> None:
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}
    accept = {"Accept": "application/json, text/event-stream"}
    async with httpx.AsyncClient() as http:
        no_token = await http.post(
            fake_highlevel.url, json=initialize, headers={**accept, "locationId": "L1"}
        )
        wrong = await http.post(
            fake_highlevel.url,
            json=initialize,
            headers={**accept, "locationId": "L1", "Authorization": "Bearer pit-wrong"},
        )
        no_location = await http.post(
            fake_highlevel.url,
            json=initialize,
            headers={**accept, "Authorization": f"Bearer {TOKEN}"},
        )
    for answer in (no_token, wrong, no_location):
        assert answer.status_code == 401
        assert answer.headers["www-authenticate"].startswith("Bearer")
        assert answer.json()["statusCode"] == 401
    assert no_location.json()["message"] == "Missing locationId header"


async def test_each_brokers_calls_carry_his_own_location(
    fake_highlevel: FakeHighLevelMcp,
) -> None:
    mcp = source(highlevel(fake_highlevel))
    try:
        tools = await mcp.list_tools({}, location_id="LOC-A")
        assert sorted(t.name for t in tools) == sorted(TOOLS)
        assert len(tools) == 21
        by_name = {t.name: t for t in tools}
        assert by_name["contacts_get-contact"].title == "Get contact"
        assert by_name["contacts_get-contact"].read_only is True
        assert by_name["contacts_add-tags"].read_only is False
        box = await ToolRouter([mcp]).toolbox({}, location_id="LOC-A")
        call = ToolInvocation("c1", "contacts_get-contact", {"contactId": "C1"})
        first = await box.execute(call, context("LOC-A"))
        second = await box.execute(call, context("LOC-B"))
    finally:
        await mcp.aclose()
    # The structured content reaches the model as it is.
    assert first.result == {
        "locationId": "LOC-A",
        "tool": "contacts_get-contact",
        "arguments": {"contactId": "C1"},
    }
    assert second.result["locationId"] == "LOC-B"
    assert fake_highlevel.calls == [
        ("contacts_get-contact", "LOC-A", {"contactId": "C1"}),
        ("contacts_get-contact", "LOC-B", {"contactId": "C1"}),
    ]
    assert fake_highlevel.refused == []


async def test_a_broker_without_a_location_gets_none_of_its_tools(
    fake_highlevel: FakeHighLevelMcp, fake_mcp: FakeMcp
) -> None:
    listings = McpServer(name="Listings", url=fake_mcp.url)
    mcp = source(highlevel(fake_highlevel), listings)
    try:
        with capture_logs() as logs:
            tools = await mcp.list_tools({}, location_id=None)
        box = await ToolRouter([mcp]).toolbox({})
        call = ToolInvocation("c1", "lookup_listing", {"mls_number": "M1"})
        done = await box.execute(call, context(None))
    finally:
        await mcp.aclose()
    assert {t.name for t in tools} == {
        "lookup_listing", "echo_text", "fail_always", "mls.search", "contact_notes",
        "schedule_showing",
    }  # fmt: skip
    assert done.success is True
    lines = [e for e in logs if e["event"].startswith("MCP server needs")]
    assert [(e["server"], e["log_level"]) for e in lines] == [("HighLevel", "info")]
    assert fake_highlevel.refused == []  # never asked without the location


async def test_a_failing_server_leaves_the_others_and_logs_once_each_way(
    fake_highlevel: FakeHighLevelMcp, fake_mcp: FakeMcp
) -> None:
    listings = McpServer(name="Listings", url=fake_mcp.url)
    mcp = source(highlevel(fake_highlevel), listings, ttl_s=0.0)
    fake_highlevel.tokens = set()  # the token is refused: the server fails
    try:
        with capture_logs() as logs:
            failing = await mcp.list_tools({}, location_id="LOC-A")
            again = await mcp.list_tools({}, location_id="LOC-A")
            fake_highlevel.tokens = {TOKEN}
            recovered = await mcp.list_tools({}, location_id="LOC-A")
            still = await mcp.list_tools({}, location_id="LOC-A")
    finally:
        await mcp.aclose()
    assert len(failing) == len(again) == 6  # the listings server's tools only
    assert len(recovered) == len(still) == 27
    events = [(e["event"], e.get("server")) for e in logs if "MCP server" in e["event"]]
    assert events == [
        ("MCP server unavailable; offering none of its tools", "HighLevel"),
        ("MCP server available again", "HighLevel"),
    ]
    assert TOKEN not in repr(logs)


async def test_a_name_offered_twice_is_qualified_by_the_later_server(
    fake_highlevel: FakeHighLevelMcp,
) -> None:
    builtin = StaticSource([make_tool("contacts_get-contact")])
    other = highlevel(fake_highlevel, name="High Level 2")
    mcp = source(highlevel(fake_highlevel), other)
    try:
        box = await ToolRouter([builtin, mcp]).toolbox({}, location_id="LOC-A")
        names = [spec.name for spec in box.specs]
        call = ToolInvocation("c1", "HighLevel_contacts_get-contact", {"contactId": "C9"})
        result = await box.execute(call, context("LOC-A"))
    finally:
        await mcp.aclose()
    assert names.count("contacts_get-contact") == 1  # the built-in one
    assert "HighLevel_contacts_get-contact" in names
    assert "High_Level_2_contacts_get-contact" in names
    assert "High_Level_2_contacts_get-contacts" in names
    assert len(names) == 1 + 21 + 21
    assert result.success is True
    assert fake_highlevel.calls == [("contacts_get-contact", "LOC-A", {"contactId": "C9"})]


async def test_server_states_name_each_server_with_its_state_and_tool_count(
    fake_highlevel: FakeHighLevelMcp, fake_mcp: FakeMcp, dead_url: str
) -> None:
    dead = McpServer(name="Down", url=dead_url)
    off = McpServer(name="Off", url=dead_url)

    async def server_url() -> str | None:
        return None

    stored = Servers(highlevel(fake_highlevel), dead, disabled=[off])
    mcp = McpSource(server_url, ttl_s=30, timeout_s=5, stored=stored)
    settings = {"mcpServerUrl": fake_mcp.url, "crmOwnerLocationId": "OWNER"}
    try:
        states = await server_states(mcp, settings, timeout_s=5)
        without_owner = await server_states(mcp, {}, timeout_s=5)
    finally:
        await mcp.aclose()
    assert [(s.name, s.state, s.tool_count, s.ok) for s in states] == [
        ("mcpServerUrl", "working", 6, True),
        ("HighLevel", "working", 21, True),
        ("Down", "failing", 0, False),
        ("Off", "disabled", 0, True),
    ]
    down_host = dead_url.split("://", 1)[1].split("/", 1)[0]
    assert states[2].detail == f"could not reach {down_host}: cannot connect to the server"
    assert stored.reads == ["all", "all"]  # each check reads the stored servers once
    fake_highlevel.tokens = set()
    mcp_refused = McpSource(
        server_url, ttl_s=30, timeout_s=5, stored=Servers(highlevel(fake_highlevel))
    )
    try:
        [refused] = await server_states(mcp_refused, settings | {"mcpServerUrl": ""}, timeout_s=5)
    finally:
        await mcp_refused.aclose()
    assert refused.detail == "HTTP 401 Unauthorized: Invalid Private Integration token"
    # The client asks `server/discover`, then falls back to `initialize`: each refused once.
    assert fake_highlevel.refused == [401, 401]
    fake_highlevel.tokens = {TOKEN}
    fake_highlevel.refused.clear()
    assert fake_highlevel.refused == []
    assert without_owner[0].detail.startswith("its headers need a CRM location")
    ok, detail = summary(states)
    assert ok is False
    assert detail == (
        "mcpServerUrl: 6 tools; HighLevel: 21 tools; "
        f"Down: could not reach {down_host}: cannot connect to the server; Off: disabled"
    )
    assert TOKEN not in detail
    assert summary([]) == (False, "mcpServerUrl is not set and no MCP server is configured")


def test_a_servers_repr_shows_no_credential() -> None:
    server = McpServer(
        "S", "https://mcp.example.com/", bearer_token=TOKEN, headers=(("X-Key", "k-secret-42"),)
    )
    assert "S" in repr(server)
    assert TOKEN not in repr(server)
    assert "k-secret-42" not in repr(server)


def test_titles_and_hints_come_from_the_listing() -> None:
    from mcp_types import Tool as McpTool
    from mcp_types import ToolAnnotations

    from controlcenter.tools.mcp.listing import listed as listed_entry

    def listed(title: str | None, annotations: ToolAnnotations | None) -> tuple[str | None, bool]:
        tool = McpTool(
            name="t", input_schema={"type": "object"}, title=title, annotations=annotations
        )
        entry = listed_entry(tool)
        return entry.title, entry.read_only

    assert listed("Own", ToolAnnotations(title="Annotated")) == ("Own", False)
    assert listed(None, ToolAnnotations(title="Annotated", read_only_hint=True)) == (
        "Annotated",
        True,
    )
    both = ToolAnnotations(read_only_hint=True, destructive_hint=True)
    assert listed(None, both) == (None, False)
    assert listed(None, ToolAnnotations(read_only_hint=False)) == (None, False)
    assert listed(None, None) == (None, False)
