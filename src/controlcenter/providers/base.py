"""One small protocol for both AI providers, in neutral types the chat loop builds.

The chat loop speaks these types only; each provider module turns them into its API's native
tool-use form (Anthropic `tool_use`/`tool_result` blocks, OpenAI `tool_calls`/`role:"tool"`)
and back.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, cast

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


@dataclass(frozen=True)
class Ask:
    """One request for a reply, ready to send to a provider: the system prompt, the turns and
    the tools offered. With `on_text`, a provider that streams is called in streaming mode
    and hands it each piece of text as it arrives; else the reply comes whole."""

    system: str
    turns: Sequence[Turn]
    tools: Sequence[ToolSpec]
    on_text: Callable[[str], None] | None = None

    def of(self, provider: Provider, api_key: str) -> Awaitable[ProviderReply]:
        stream = getattr(provider, "stream", None) if self.on_text is not None else None
        if stream is None or self.on_text is None:
            return provider.complete(
                api_key=api_key, system=self.system, turns=self.turns, tools=self.tools
            )
        streaming = cast(StreamingProvider, provider)
        return streaming.stream(
            api_key=api_key,
            system=self.system,
            turns=self.turns,
            tools=self.tools,
            on_text=self.on_text,
        )
