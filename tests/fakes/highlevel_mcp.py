"""A loopback stand-in for HighLevel's MCP server (`https://services.leadconnectorhq.com/mcp/`),
built on the `mcp` package's server (MCPServer) and served over streamable HTTP.

What it keeps of the real one, per HighLevel's help article on its MCP server (May 2026):
- every request needs `Authorization: Bearer <private integration token>` and a `locationId`
  header naming the sub-account; without either (or with a token it does not know) it answers
  401 before any MCP message is read, with `WWW-Authenticate: Bearer` as MCP's authorization
  rules ask of a protected server, and a JSON body `{statusCode, message}` like HighLevel's API;
- the 21 tools of the article, named `<app>_<operation>`: 8 for contacts, 3 conversations,
  4 opportunities, 2 calendars, 2 locations, 2 payments. Reading tools say `readOnlyHint`.

Each tool answers structured content naming the location it acted in. `calls` records every
call: (tool, the `locationId` header it came with, its arguments).
"""

from __future__ import annotations

import contextlib
import inspect
import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.transport_security import TransportSecuritySettings
from mcp.types import ToolAnnotations

from controlcenter.tools.mcp.store import McpServerStore, StoredServer
from tests.fakes.server import LoopbackServer

MCP_PATH = "/mcp/"
TOKEN = "pit-0f6c2a57-9d1e-4a9b-8c3e-12ab34cd56ef"

# name: (title, description, parameters, reads only)
TOOLS: dict[str, tuple[str, str, tuple[str, ...], bool]] = {
    "contacts_get-contacts": ("Get contacts", "Search and list contacts.", ("query",), True),
    "contacts_create-contact": (
        "Create contact",
        "Create a contact.",
        ("firstName", "email"),
        False,
    ),
    "contacts_get-contact": ("Get contact", "Fetch a contact's details.", ("contactId",), True),
    "contacts_update-contact": (
        "Update contact",
        "Update a contact.",
        ("contactId", "email"),
        False,
    ),
    "contacts_upsert-contact": ("Upsert contact", "Create or update a contact.", ("email",), False),
    "contacts_add-tags": ("Add tags", "Add tags to a contact.", ("contactId", "tags"), False),
    "contacts_remove-tags": (
        "Remove tags",
        "Remove tags from a contact.",
        ("contactId", "tags"),
        False,
    ),
    "contacts_get-all-tasks": ("Get tasks", "Get all tasks of a contact.", ("contactId",), True),
    "conversations_search-conversation": (
        "Search conversations",
        "Search and filter conversations.",
        ("contactId",),
        True,
    ),
    "conversations_get-messages": (
        "Get messages",
        "Get the messages of a conversation.",
        ("conversationId",),
        True,
    ),
    "conversations_send-a-new-message": (
        "Send message",
        "Send a new message to a contact.",
        ("contactId", "message"),
        False,
    ),
    "opportunities_search-opportunity": (
        "Search opportunities",
        "Search opportunities.",
        ("query",),
        True,
    ),
    "opportunities_get-opportunity": (
        "Get opportunity",
        "Fetch an opportunity.",
        ("opportunityId",),
        True,
    ),
    "opportunities_update-opportunity": (
        "Update opportunity",
        "Update an opportunity.",
        ("opportunityId", "status"),
        False,
    ),
    "opportunities_get-pipelines": ("Get pipelines", "List the pipelines.", (), True),
    "calendars_get-calendar-events": (
        "Get calendar events",
        "Get calendar events.",
        ("calendarId",),
        True,
    ),
    "calendars_get-appointment-notes": (
        "Get appointment notes",
        "Get an appointment's notes.",
        ("appointmentId",),
        True,
    ),
    "locations_get-location": ("Get location", "Get the location's details.", (), True),
    "locations_get-custom-fields": ("Get custom fields", "Get the custom fields.", (), True),
    "payments_get-order-by-id": ("Get order", "Get an order by its id.", ("orderId",), True),
    "payments_list-transactions": ("List transactions", "List transactions.", (), True),
}


@dataclass
class FakeHighLevelMcp:
    server: LoopbackServer
    tokens: set[str] = field(default_factory=lambda: {TOKEN})
    calls: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)
    refused: list[int] = field(default_factory=list)  # statuses of the refused requests

    @property
    def url(self) -> str:
        return self.server.url + MCP_PATH

    def reset(self) -> None:
        self.calls.clear()
        self.refused.clear()
        self.tokens = {TOKEN}


async def create_highlevel(
    store: McpServerStore, fake: FakeHighLevelMcp, user_id: str, *, bearer_token: str = TOKEN
) -> StoredServer:
    """The fake stored as an operator stores HighLevel's MCP server: the private token, and the
    broker's own CRM location in the `locationId` header."""
    return await store.create(
        name="HighLevel",
        url=fake.url,
        enabled=True,
        bearer_token=bearer_token,
        headers={"locationId": "{crmLocationId}"},
        user_id=user_id,
    )


@contextlib.asynccontextmanager
async def stored_highlevel(
    store: McpServerStore, fake: FakeHighLevelMcp, user_id: str, *, bearer_token: str = TOKEN
) -> AsyncIterator[StoredServer]:
    """`create_highlevel` in a running service's store, which forgets its servers afterwards:
    the tables are emptied behind its back."""
    created = await create_highlevel(store, fake, user_id, bearer_token=bearer_token)
    try:
        yield created
    finally:
        store.forget()


def _tool(fake: FakeHighLevelMcp, name: str, parameters: tuple[str, ...]) -> Callable[..., Any]:
    async def run(ctx: Context, **arguments: Any) -> dict[str, Any]:
        location = (ctx.headers or {}).get("locationid", "")
        given = {k: v for k, v in arguments.items() if v is not None}
        fake.calls.append((name, location, given))
        return {"locationId": location, "tool": name, "arguments": given}

    # The SDK derives the input schema from the signature: give each tool its parameters.
    run.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [inspect.Parameter("ctx", inspect.Parameter.KEYWORD_ONLY, annotation=Context)]
        + [
            inspect.Parameter(
                p, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=str | None
            )
            for p in parameters
        ],
        return_annotation=dict[str, Any],
    )
    return run


def build_fake_highlevel_mcp() -> FakeHighLevelMcp:
    app = MCPServer("highlevel", log_level="WARNING")
    fake = FakeHighLevelMcp(server=LoopbackServer(_placeholder))
    for name, (title, description, parameters, reads) in TOOLS.items():
        app.add_tool(
            _tool(fake, name, parameters),
            name=name,
            title=title,
            description=description,
            annotations=ToolAnnotations(read_only_hint=reads, destructive_hint=not reads),
        )
    asgi = app.streamable_http_app(
        streamable_http_path=MCP_PATH.rstrip("/"),
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )

    async def guarded(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
            problem = _refusal(fake, headers)
            if problem is not None:
                fake.refused.append(401)
                await _unauthorized(send, problem)
                return
            if scope["path"] == MCP_PATH:  # the real endpoint has the slash; the SDK's none
                scope = {**scope, "path": MCP_PATH.rstrip("/"), "raw_path": b"/mcp"}
        await asgi(scope, receive, send)

    fake.server = LoopbackServer(guarded, uvicorn_options={"lifespan": "on"})
    return fake


def _refusal(fake: FakeHighLevelMcp, headers: dict[str, str]) -> str | None:
    auth = headers.get("authorization", "")
    scheme, _, token = auth.partition(" ")
    if scheme.lower() != "bearer" or not token:
        return "Missing Authorization header: a private integration token is required"
    if token not in fake.tokens:
        return "Invalid Private Integration token"
    if not headers.get("locationid"):
        return "Missing locationId header"
    return None


async def _unauthorized(send: Any, message: str) -> None:
    body = json.dumps({"statusCode": 401, "message": message}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 401,
            "headers": [
                (b"content-type", b"application/json"),
                (b"www-authenticate", b'Bearer realm="mcp"'),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


async def _placeholder(scope: Any, receive: Any, send: Any) -> None:
    raise RuntimeError("replaced before start")
