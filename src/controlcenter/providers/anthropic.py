"""provider_a: the Anthropic Messages API through the official async SDK (CONTRACT 1, 5)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import anthropic
from anthropic.types import (
    MessageParam,
    TextBlockParam,
    ToolParam,
    ToolResultBlockParam,
    ToolUseBlockParam,
)

from controlcenter.common.secrets import redact
from controlcenter.llm.types import AssistantTurn, ProviderReply, ToolCall, ToolSpec, Turn, UserTurn
from controlcenter.providers.base import ProviderError
from controlcenter.providers.clients import POOL_LIMITS, PooledClients
from controlcenter.providers.history import (
    CONNECTION_MESSAGE,
    EMPTY_MESSAGE,
    TIMEOUT_MESSAGE,
    has_text,
    new_call_id,
    sendable_turns,
)

Block = TextBlockParam | ToolUseBlockParam | ToolResultBlockParam


class AnthropicProvider:
    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        timeout_s: float,
        max_retries: int,
        max_tokens: int,
    ) -> None:
        self._model = model
        self._max_tokens = max_tokens
        self._clients = PooledClients(
            anthropic.AsyncAnthropic,
            anthropic.DefaultAsyncHttpxClient(limits=POOL_LIMITS, timeout=timeout_s),
            base_url=base_url,
            timeout_s=timeout_s,
            max_retries=max_retries,
        )

    async def complete(
        self,
        *,
        api_key: str,
        system: str,
        turns: Sequence[Turn],
        tools: Sequence[ToolSpec],
    ) -> ProviderReply:
        messages = to_messages(turns)
        if not messages:  # the API rejects an empty list; nothing to ask the model
            raise ProviderError(EMPTY_MESSAGE, None)
        client = self._clients.get(api_key)
        options = self._options(system, tools)
        try:
            message = await client.messages.create(
                model=self._model,
                max_tokens=self._max_tokens,
                messages=messages,
                **options,
            )
        except anthropic.APIError as exc:
            raise _provider_error(exc, api_key) from None
        return _reply(message)

    async def stream(
        self,
        *,
        api_key: str,
        system: str,
        turns: Sequence[Turn],
        tools: Sequence[ToolSpec],
        on_text: Callable[[str], None],
    ) -> ProviderReply:
        """The same request through the SDK's streaming helper (`messages.stream`)."""
        messages = to_messages(turns)
        if not messages:
            raise ProviderError(EMPTY_MESSAGE, None)
        client = self._clients.get(api_key)
        options = self._options(system, tools)
        try:
            async with client.messages.stream(
                model=self._model,
                max_tokens=self._max_tokens,
                messages=messages,
                **options,
            ) as stream:
                async for event in stream:
                    if event.type == "text" and event.text:
                        on_text(event.text)
                message = await stream.get_final_message()
        except anthropic.APIError as exc:
            raise _provider_error(exc, api_key) from None
        return _reply(message)

    def _options(self, system: str, tools: Sequence[ToolSpec]) -> dict[str, Any]:
        options: dict[str, Any] = {}
        if has_text(system):
            options["system"] = system
        if tools:
            options["tools"] = [_tool(spec) for spec in tools]
        return options

    async def aclose(self) -> None:
        await self._clients.aclose()


def _provider_error(exc: anthropic.APIError, api_key: str) -> ProviderError:
    # Raised `from None` by the callers: the SDK's exception text may quote the key.
    if isinstance(exc, anthropic.APIStatusError):
        return ProviderError(redact(_api_message(exc), api_key), exc.status_code)
    if isinstance(exc, anthropic.APITimeoutError):
        return ProviderError(TIMEOUT_MESSAGE, None)
    if isinstance(exc, anthropic.APIConnectionError):
        return ProviderError(CONNECTION_MESSAGE, None)
    return ProviderError(redact(exc.message, api_key), None)  # a reply the SDK could not read


def _reply(message: anthropic.types.Message) -> ProviderReply:
    text = "".join(block.text for block in message.content if block.type == "text")
    calls = tuple(
        ToolCall(id=block.id or new_call_id(), name=block.name, arguments=_object(block.input))
        for block in message.content
        if block.type == "tool_use"
    )
    return ProviderReply(
        text=text,
        tool_calls=calls,
        input_tokens=message.usage.input_tokens,
        output_tokens=message.usage.output_tokens,
    )


def to_messages(turns: Sequence[Turn]) -> list[MessageParam]:
    """The turns in the Messages API's native form; same-role neighbours merged into one."""
    grouped: list[tuple[str, list[Block]]] = []
    for turn in sendable_turns(turns):
        role, blocks = _blocks(turn)
        if grouped and grouped[-1][0] == role:
            grouped[-1][1].extend(blocks)
        else:
            grouped.append((role, blocks))
    messages: list[MessageParam] = []
    for role, blocks in grouped:
        if role == "user":
            messages.append({"role": "user", "content": blocks})
        else:
            messages.append({"role": "assistant", "content": blocks})
    return messages


def _blocks(turn: Turn) -> tuple[str, list[Block]]:
    if isinstance(turn, UserTurn):
        return "user", [{"type": "text", "text": turn.text}]
    if isinstance(turn, AssistantTurn):
        blocks: list[Block] = []
        if has_text(turn.text):
            blocks.append({"type": "text", "text": turn.text})
        for call in turn.tool_calls:
            blocks.append(
                {"type": "tool_use", "id": call.id, "name": call.name, "input": call.arguments}
            )
        return "assistant", blocks
    return "user", [
        {"type": "tool_result", "tool_use_id": result.tool_call_id, "content": result.line()}
        for result in turn.results
    ]


def _tool(spec: ToolSpec) -> ToolParam:
    return {"name": spec.name, "description": spec.description, "input_schema": spec.input_schema}


def _object(value: object) -> dict[str, Any]:
    return dict(value) if isinstance(value, dict) else {}


def _api_message(exc: anthropic.APIStatusError) -> str:
    """The API's own `error.message` when the body has one, else the SDK's summary."""
    body = exc.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict):
            message = inner.get("message")
            if isinstance(message, str) and message:
                return message
    return exc.message
