"""What a tool is, what it is called with, what it returns, and how it fails."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ToolContext:
    """Who a tool acts for (SPEC 4.2 step 7): the session user and their own CRM client."""

    user_id: str
    crm: Any | None  # the broker's location-scoped CRM client; None when no location is linked


ToolHandler = Callable[[dict[str, Any], ToolContext], Awaitable[Any]]


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    input_schema: dict[str, Any]  # JSON Schema of the arguments, checked before `handler` runs
    handler: ToolHandler


class ToolError(Exception):
    """A failure the model should read as the ToolResult's `error`, and can act on."""


@dataclass(frozen=True)
class ToolCall:
    """CONTRACT 5: `{id, name, arguments}`; `id` is what a ToolResult's `toolCallId` names."""

    id: str
    name: str
    arguments: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "arguments": self.arguments}


@dataclass(frozen=True)
class ToolResult:
    """SPEC 2.4: `result` on success, `error` on failure."""

    tool_call_id: str
    success: bool
    result: Any = None
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        if self.success:
            return {"toolCallId": self.tool_call_id, "success": True, "result": self.result}
        return {"toolCallId": self.tool_call_id, "success": False, "error": self.error or ""}

    def line(self) -> str:
        """The SPEC 4.2 step 8.5 line the model reads for this result."""
        if self.success:
            return f"Tool {self.tool_call_id} result: {_json(self.result)}"
        return f"Tool {self.tool_call_id} error: {self.error or ''}"


def _json(value: Any) -> str:
    import json

    return json.dumps(value, ensure_ascii=False, default=str)
