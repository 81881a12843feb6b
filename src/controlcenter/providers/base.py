"""One small protocol for both AI providers, in neutral types the chat loop builds.

The chat loop speaks these types only; each provider module turns them into its API's native
tool-use form (Anthropic `tool_use`/`tool_result` blocks, OpenAI `tool_calls`/`role:"tool"`)
and back.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from controlcenter.llm.types import ProviderReply, ToolSpec, Turn

PROVIDER_A = "provider_a"
PROVIDER_B = "provider_b"
PROVIDERS = (PROVIDER_A, PROVIDER_B)


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


class StreamingProvider(Provider, Protocol):
    """A provider that can also answer in streaming mode (the chat's `?deltas=tokens`):
    `on_text` receives each piece of text as it arrives; the reply is the whole answer."""

    async def stream(
        self,
        *,
        api_key: str,
        system: str,
        turns: Sequence[Turn],
        tools: Sequence[ToolSpec],
        on_text: Callable[[str], None],
    ) -> ProviderReply: ...
