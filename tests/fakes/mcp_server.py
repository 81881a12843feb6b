"""A loopback MCP server with a few tools, built with the `mcp` package (MCPServer, formerly
FastMCP) and served over streamable HTTP by LoopbackServer.

Tools: `lookup_listing` (structured result), `echo_text` (plain text), `fail_always` (a tool
error), `mls.search` (a name that needs sanitising for the providers), `contact_notes` (a name
in the priority group), `schedule_showing` (publishes a top-level `anyOf`, as MCP servers in
the wild do: the real provider APIs refuse it as it is). `calls` records every call the server
received, in order; `methods` the JSON-RPC method of every request message, in order.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass, field
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError as McpToolError
from mcp.server.transport_security import TransportSecuritySettings
from mcp.types import ToolAnnotations

from tests.fakes.server import LoopbackServer

MCP_PATH = "/mcp"


@dataclass
class FakeMcp:
    server: LoopbackServer
    app: MCPServer | None = None  # its tools, for a test that changes one
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    methods: list[str] = field(default_factory=list)

    @property
    def url(self) -> str:
        return self.server.url + MCP_PATH

    def reset(self) -> None:
        self.calls.clear()
        self.methods.clear()


def build_fake_mcp() -> FakeMcp:
    # The tools are coroutines: the SDK runs a plain function in a worker thread, a thread hop
    # in every call's time (0.3-1 ms of a call's 3-4 ms here) that a cheap tool would not have.
    app = MCPServer("fake-listings", log_level="WARNING")
    fake = FakeMcp(server=LoopbackServer(_asgi_placeholder))

    @app.tool(
        description="Look up a listing by its MLS number.",
        annotations=ToolAnnotations(read_only_hint=True),
    )
    async def lookup_listing(mls_number: str) -> dict[str, Any]:
        fake.calls.append(("lookup_listing", {"mls_number": mls_number}))
        return {"mlsNumber": mls_number, "price": 1250000, "status": "active"}

    @app.tool(description="Echo the text back.", annotations=ToolAnnotations(read_only_hint=False))
    async def echo_text(text: str) -> str:
        fake.calls.append(("echo_text", {"text": text}))
        return f"echo: {text}"

    @app.tool(description="Always fails.")
    async def fail_always(reason: str = "") -> str:
        fake.calls.append(("fail_always", {"reason": reason}))
        raise McpToolError(f"listing service unavailable {reason}".strip())

    @app.tool(name="mls.search", description="Search listings (a dotted name).")
    async def mls_search(city: str) -> list[str]:
        fake.calls.append(("mls.search", {"city": city}))
        return [f"{city} tower", f"{city} plaza"]

    @app.tool(description="Notes about a contact, from the listing service.")
    async def contact_notes(contact_id: str) -> str:
        fake.calls.append(("contact_notes", {"contact_id": contact_id}))
        return f"notes for {contact_id}"

    @app.tool(description="Schedule a showing of a listing; needs an e-mail or a phone.")
    async def schedule_showing(
        listing_id: str, email: str | None = None, phone: str | None = None
    ) -> str:
        fake.calls.append(("schedule_showing", {"listing_id": listing_id, "email": email}))
        return f"showing of {listing_id} booked for {email or phone}"

    # The decorator derives the schema from the signature; the rule "e-mail or phone" is
    # published the way many servers do it, with a top-level anyOf.
    showing = app._tool_manager.get_tool("schedule_showing")
    assert showing is not None
    showing.parameters["anyOf"] = [{"required": ["email"]}, {"required": ["phone"]}]

    asgi = app.streamable_http_app(
        streamable_http_path=MCP_PATH,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )

    async def recording(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await asgi(scope, receive, send)
            return
        body = b""

        async def peek() -> Any:
            nonlocal body
            message = await receive()
            if message["type"] != "http.request":
                return message
            body += message.get("body", b"")
            if not message.get("more_body"):
                with contextlib.suppress(ValueError):
                    parsed = json.loads(body)
                    for item in parsed if isinstance(parsed, list) else [parsed]:
                        if isinstance(item, dict) and "method" in item:
                            fake.methods.append(item["method"])
            return message

        await asgi(scope, peek, send)

    fake.server = LoopbackServer(recording, uvicorn_options={"lifespan": "on"})
    fake.app = app
    return fake


async def _asgi_placeholder(scope: Any, receive: Any, send: Any) -> None:
    raise RuntimeError("replaced before start")
