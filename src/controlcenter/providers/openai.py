"""provider_b: OpenAI Chat Completions (or a server speaking it) through the official async SDK."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
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
        with sdk_errors(_ERRORS, api_key):
            completion = await client.chat.completions.create(
                model=self._model,
                max_completion_tokens=self._max_tokens,
                messages=messages,
                **_options(tools),
            )
        if not completion.choices:
            raise ProviderError(NO_CHOICES, None)
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
        usage = completion.usage
        # A refusal comes instead of content; the user reads it as the reply.
        return ProviderReply(
            text=message.content or message.refusal or "",
            tool_calls=calls,
            input_tokens=usage.prompt_tokens if usage is not None else 0,
            output_tokens=usage.completion_tokens if usage is not None else 0,
        )

    async def stream(
        self,
        *,
        api_key: str,
        system: str,
        turns: Sequence[Turn],
        tools: Sequence[ToolSpec],
        on_text: Callable[[str], None],
    ) -> ProviderReply:
        """The same request in streaming mode (`stream=True`, with the usage chunk asked for);
        the chunks' text goes to `on_text`, their tool calls are put together by index."""
        messages = to_messages(system, turns)
        if all(message["role"] == "system" for message in messages):
            raise ProviderError(EMPTY_MESSAGE, None)
        client = self._clients.get(api_key)
        text: list[str] = []
        calls: dict[int, list[str]] = {}  # index -> [id, name, arguments]
        usage = None
        chose = False
        with sdk_errors(_ERRORS, api_key):
            stream = await client.chat.completions.create(
                model=self._model,
                max_completion_tokens=self._max_tokens,
                messages=messages,
                stream=True,
                stream_options={"include_usage": True},
                **_options(tools),
            )
            async with stream:
                async for chunk in stream:
                    if chunk.usage is not None:
                        usage = chunk.usage
                    for choice in chunk.choices[:1]:
                        chose = True
                        delta = choice.delta
                        piece = delta.content or delta.refusal
                        if piece:
                            text.append(piece)
                            on_text(piece)
                        for call in delta.tool_calls or ():
                            entry = calls.setdefault(call.index, ["", "", ""])
                            entry[0] = call.id or entry[0]
                            if call.function is not None:
                                entry[1] += call.function.name or ""
                                entry[2] += call.function.arguments or ""
        if not chose:
            raise ProviderError(NO_CHOICES, None)
        return ProviderReply(
            text="".join(text),
            tool_calls=tuple(
                ToolCall(id=id_ or new_call_id(), name=name, arguments=parse_arguments(args))
                for id_, name, args in (calls[i] for i in sorted(calls))
            ),
            input_tokens=usage.prompt_tokens if usage is not None else 0,
            output_tokens=usage.completion_tokens if usage is not None else 0,
        )


NO_CHOICES = "The provider returned no choices"


def _options(tools: Sequence[ToolSpec]) -> dict[str, Any]:
    # The API rejects an empty `tools` array.
    return {"tools": [_tool(spec) for spec in tools]} if tools else {}


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
