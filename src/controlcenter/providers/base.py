"""One small protocol for both AI providers, in neutral types the chat loop builds.

The chat loop speaks these types only; each provider module turns them into its API's native
tool-use form (Anthropic `tool_use`/`tool_result` blocks, OpenAI `tool_calls`/`role:"tool"`)
and back.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from controlcenter.tools.base import ToolCall, ToolResult

PROVIDER_A = "provider_a"
PROVIDER_B = "provider_b"
PROVIDERS = (PROVIDER_A, PROVIDER_B)


@dataclass(frozen=True)
class ToolSpec:
    """A tool as offered to a provider: its name already matches ^[A-Za-z0-9_-]{1,64}$."""

    name: str
    description: str
    input_schema: dict[str, Any]


@dataclass(frozen=True)
class UserTurn:
    text: str


@dataclass(frozen=True)
class AssistantTurn:
    text: str
    tool_calls: tuple[ToolCall, ...] = ()


@dataclass(frozen=True)
class ToolResultsTurn:
    """The results of the previous assistant turn's tool calls, one per call, in order."""

    results: tuple[ToolResult, ...]


Turn = UserTurn | AssistantTurn | ToolResultsTurn


@dataclass(frozen=True)
class ProviderReply:
    text: str
    tool_calls: tuple[ToolCall, ...] = ()


class ProviderError(Exception):
    """An error raised by the provider's API client, with its HTTP status when it had one.

    `message` is safe to show the user: it never contains the API key.
    """

    def __init__(self, message: str, status_code: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.status_code = status_code


class Provider(Protocol):
    async def complete(
        self,
        *,
        api_key: str,
        system: str,
        turns: Sequence[Turn],
        tools: Sequence[ToolSpec],
    ) -> ProviderReply: ...
