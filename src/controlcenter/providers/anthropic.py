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

from controlcenter.llm.types import AssistantTurn, ProviderReply, ToolCall, ToolSpec, Turn, UserTurn
from controlcenter.providers.base import ProviderError
from controlcenter.providers.history import EMPTY_MESSAGE, has_text, new_call_id, sendable_turns
from controlcenter.providers.sdk import ProviderOptions, SdkErrors, SdkProvider, sdk_errors

Block = TextBlockParam | ToolUseBlockParam | ToolResultBlockParam
_ERRORS = SdkErrors(
    anthropic.APIStatusError,
    anthropic.APITimeoutError,
    anthropic.APIConnectionError,
    anthropic.APIError,
)


class AnthropicProvider(SdkProvider[anthropic.AsyncAnthropic]):
    def __init__(self, options: ProviderOptions) -> None:
        super().__init__(options, anthropic.AsyncAnthropic, anthropic.DefaultAsyncHttpxClient)

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
        with sdk_errors(_ERRORS, api_key):
            message = await client.messages.create(
                model=self._model,
                max_tokens=self._max_tokens,
                messages=messages,
                **options,
            )
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
        with sdk_errors(_ERRORS, api_key):
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
        return _reply(message)

    def _options(self, system: str, tools: Sequence[ToolSpec]) -> dict[str, Any]:
        options: dict[str, Any] = {}
        if has_text(system):
            options["system"] = system
        if tools:
            options["tools"] = [_tool(spec) for spec in tools]
        return options


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
