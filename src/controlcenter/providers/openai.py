"""provider_b: OpenAI Chat Completions (or a server speaking it) through the official async SDK."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import openai
from openai.types.chat import (
    ChatCompletionFunctionToolParam,
    ChatCompletionMessageFunctionToolCallParam,
    ChatCompletionMessageParam,
)

from controlcenter.llm.types import AssistantTurn, ProviderReply, ToolCall, ToolSpec, Turn, UserTurn
from controlcenter.providers.base import ProviderError
from controlcenter.providers.history import (
    EMPTY_MESSAGE,
    has_text,
    new_call_id,
    parse_arguments,
    sendable_turns,
)
from controlcenter.providers.sdk import ProviderOptions, SdkErrors, SdkProvider, sdk_errors

_ERRORS = SdkErrors(
    openai.APIStatusError, openai.APITimeoutError, openai.APIConnectionError, openai.APIError
)


class OpenAIProvider(SdkProvider[openai.AsyncOpenAI]):
    def __init__(self, options: ProviderOptions) -> None:
        super().__init__(options, openai.AsyncOpenAI, openai.DefaultAsyncHttpxClient)

    async def complete(
        self,
        *,
        api_key: str,
        system: str,
        turns: Sequence[Turn],
        tools: Sequence[ToolSpec],
    ) -> ProviderReply:
        messages = to_messages(system, turns)
        if all(message["role"] == "system" for message in messages):
            raise ProviderError(EMPTY_MESSAGE, None)  # nothing to ask the model
        client = self._clients.get(api_key)
        options: dict[str, Any] = {}
        if tools:  # the API rejects an empty `tools` array
            options["tools"] = [_tool(spec) for spec in tools]
        with sdk_errors(_ERRORS, api_key):
            completion = await client.chat.completions.create(
                model=self._model,
                max_completion_tokens=self._max_tokens,
                messages=messages,
                **options,
            )
        if not completion.choices:
            raise ProviderError("The provider returned no choices", None)
        message = completion.choices[0].message
        calls = tuple(
            ToolCall(
                id=call.id or new_call_id(),
                name=call.function.name,
                arguments=parse_arguments(call.function.arguments),
            )
            for call in message.tool_calls or ()
            if call.type == "function"
        )
        # A refusal comes instead of content; the user reads it as the reply.
        return ProviderReply(text=message.content or message.refusal or "", tool_calls=calls)


def to_messages(system: str, turns: Sequence[Turn]) -> list[ChatCompletionMessageParam]:
    """The system prompt, then the turns in Chat Completions' native form."""
    messages: list[ChatCompletionMessageParam] = []
    if has_text(system):
        messages.append({"role": "system", "content": system})
    for turn in sendable_turns(turns):
        if isinstance(turn, UserTurn):
            messages.append({"role": "user", "content": turn.text})
        elif isinstance(turn, AssistantTurn):
            calls: list[ChatCompletionMessageFunctionToolCallParam] = [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": json.dumps(call.arguments)},
                }
                for call in turn.tool_calls
            ]
            text = turn.text if has_text(turn.text) else None
            if calls:
                messages.append({"role": "assistant", "content": text, "tool_calls": calls})
            else:
                messages.append({"role": "assistant", "content": turn.text})
        else:
            for result in turn.results:
                messages.append(
                    {"role": "tool", "tool_call_id": result.tool_call_id, "content": result.line()}
                )
    return messages


def _tool(spec: ToolSpec) -> ChatCompletionFunctionToolParam:
    return {
        "type": "function",
        "function": {
            "name": spec.name,
            "description": spec.description,
            "parameters": spec.input_schema,
        },
    }
