"""The neutral types of one conversation with a model: turns, tool calls, their results, and
the tools offered. Providers translate them to and from their APIs; tools consume and produce
them; neither imports the other."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Annotated, Any, NotRequired

from pydantic import Field
from typing_extensions import TypedDict


class ToolCall(TypedDict):
    """A tool call as the chat's events and messages show it."""

    id: str
    name: str
    arguments: dict[str, Any]


class ToolResult(TypedDict):
    """A tool call's result as the chat's events and messages show it."""

    toolCallId: str
    success: bool
    result: NotRequired[Annotated[Any, Field(description="on success: the tool's result")]]
    error: NotRequired[Annotated[str, Field(description="on failure")]]


@dataclass(frozen=True)
class ToolSpec:
    """A tool as offered to a provider: its name already matches ^[A-Za-z0-9_-]{1,64}$."""

    name: str
    description: str
    input_schema: dict[str, Any]


@dataclass(frozen=True)
class ToolInvocation:
    """A tool call as `{id, name, arguments}`; `id` is what a ToolOutcome's `toolCallId` names."""

    id: str
    name: str
    arguments: dict[str, Any]

    def to_json(self) -> ToolCall:
        return {"id": self.id, "name": self.name, "arguments": self.arguments}


@dataclass(frozen=True)
class ToolOutcome:
    """A tool call's result: `result` on success, `error` on failure."""

    tool_call_id: str
    success: bool
    result: Any = None
    error: str | None = None

    def to_json(self) -> ToolResult:
        if self.success:
            return {"toolCallId": self.tool_call_id, "success": True, "result": self.result}
        return {"toolCallId": self.tool_call_id, "success": False, "error": self.error or ""}

    def line(self) -> str:
        """The line the model reads for this result, in the user message after the tool calls."""
        if self.success:
            return f"Tool {self.tool_call_id} result: {_json(self.result)}"
        return f"Tool {self.tool_call_id} error: {self.error or ''}"


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


@dataclass(frozen=True)
class UserTurn:
    text: str


@dataclass(frozen=True)
class AssistantTurn:
    text: str
    tool_calls: tuple[ToolInvocation, ...] = ()


@dataclass(frozen=True)
class ToolResultsTurn:
    """The results of the previous assistant turn's tool calls, one per call, in order."""

    results: tuple[ToolOutcome, ...]


Turn = UserTurn | AssistantTurn | ToolResultsTurn


@dataclass(frozen=True)
class ProviderReply:
    text: str
    tool_calls: tuple[ToolInvocation, ...] = ()
    # The API's own usage fields for this call; 0 when it sent none.
    input_tokens: int = 0
    output_tokens: int = 0
