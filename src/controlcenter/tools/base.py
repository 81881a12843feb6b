"""What a tool is, what it is called with, what it returns, and how it fails."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from sqlalchemy.sql import Executable


class RunWrites(Protocol):
    """The chat's run a call is made in, for the writes that belong with its events."""

    def store_with_events(self, statement: Executable, params: Mapping[str, Any]) -> None:
        """`statement` with `params` stored in the transaction of the run's next events (with
        its end at the latest): no unit of work of its own."""
        ...


@dataclass(frozen=True)
class ToolContext:
    """Who a tool acts for: the session user, their own CRM client and CRM location;
    and the settings as the chat read them when it began (`Settings`), when it did."""

    user_id: str
    crm: Any | None  # the broker's location-scoped CRM client; None when no location is linked
    settings: Settings | None = field(default=None)
    # The CRM location linked to the user (MCP servers whose headers carry it); None: none.
    location_id: str | None = None
    # Where the call was made, for the ledger of writes: the chat's conversation and assistant
    # message (None outside a chat, such as `controlcenter tools call`), and the call's id,
    # which the toolbox sets for each call it runs.
    conversation_id: str | None = None
    message_id: str | None = None
    tool_call_id: str | None = None
    run: RunWrites | None = None  # the chat's run (None outside a chat)


# A snapshot of administrator settings by name, read once per chat.
Settings = Mapping[str, str]


ToolHandler = Callable[[dict[str, Any], ToolContext], Awaitable[Any]]


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    input_schema: dict[str, Any]  # JSON Schema of the arguments, checked before `handler` runs
    handler: ToolHandler
    # Whether the tool only reads: under `toolApproval: "writes"` a tool that may write waits
    # for the user's approval, so False, the safe default, asks for it.
    read_only: bool = False
    # The human title the chat shows on its tool card (MCP's `title`, or its annotations'
    # `title`); None: the tool has none and is shown by its name.
    title: str | None = None
    # Where the tool comes from when a source has several origins (an MCP server's name): a
    # tool whose name an earlier source offers is offered as `<origin>_<name>` (tools.router).
    origin: str | None = None


class ToolError(Exception):
    """A failure the model should read as the ToolOutcome's `error`, and can act on."""
