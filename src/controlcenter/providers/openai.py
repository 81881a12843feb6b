"""provider_b: OpenAI Chat Completions (or a server speaking it) through the official async SDK."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import openai
from openai.types.chat import (
    ChatCompletion,
    ChatCompletionChunk,
    ChatCompletionFunctionToolParam,
    ChatCompletionMessageFunctionToolCallParam,
    ChatCompletionMessageParam,
)

from controlcenter.llm.types import (
    AssistantTurn,
    ProviderReply,
    ToolInvocation,
    ToolSpec,
    Turn,
    UserTurn,
)
from controlcenter.providers.base import ProviderError
from controlcenter.providers.body import Body, Fixed, Parts
from controlcenter.providers.history import (
    UNREADABLE_MESSAGE,
    has_text,
    new_call_id,
    parse_arguments,
    sendable_turns,
)
from controlcenter.providers.sdk import OnText, ProviderOptions, SdkErrors, SdkProvider, Tools


class OpenAIProvider(SdkProvider[openai.AsyncOpenAI, ChatCompletionMessageParam]):
    errors = SdkErrors(
        openai.APIStatusError, openai.APITimeoutError, openai.APIConnectionError, openai.APIError
    )

    def __init__(self, options: ProviderOptions) -> None:
        super().__init__(options, openai.AsyncOpenAI, openai.DefaultAioHttpClient)

    def _messages(self, system: str, turns: Sequence[Turn]) -> list[ChatCompletionMessageParam]:
        return to_messages(system, turns)  # the system prompt is the first message here

    def _fixed(self, system: str, tools: Tools) -> Fixed:
        # The keys in `chat.completions.create`'s order, so the bytes are the ones it would send
        # (with `stream=True` and the usage chunk asked for, when streaming).
        tokens = {"max_completion_tokens": self._max_tokens}
        return Fixed(
            Body.around({"model": self._model}, {**tokens, **_options(tools)}),
            Body.around(
                {"model": self._model, "stream": True},
                {**tokens, "stream_options": {"include_usage": True}, **_options(tools)},
            ),
        )

    async def _post(self, client: openai.AsyncOpenAI, body: Parts) -> ProviderReply:
        # `security`: the credentials `create` asks for, the API key as a bearer token only
        # (`post`'s default also allows the admin key of OPENAI_ADMIN_KEY where there is no API
        # key; the pooled clients always have one, but the request stays create's own).
        completion = await client.post(
            PATH,
            cast_to=ChatCompletion,
            # Joined: this SDK retries only a body of bytes, a list or a seekable file (its
            # `_RequestBodyReplay`), and would give up retrying an iterable of parts.
            content=bytes(body),
            options={"security": {"bearer_auth": True}},
        )
        if not isinstance(completion, ChatCompletion):  # the SDK hands a non-JSON body back as text
            raise ProviderError(UNREADABLE_MESSAGE, None)
        if not completion.choices:
            raise ProviderError(NO_CHOICES, None)
        message = completion.choices[0].message
        calls = tuple(
            ToolInvocation(
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

    async def _stream(
        self, client: openai.AsyncOpenAI, body: Parts, on_text: OnText
    ) -> ProviderReply:
        """What `create(stream=True)` does, with the usage chunk asked for: the SDK's chunk
        stream; the chunks' text goes to `on_text`, their tool calls are put together by
        index."""
        text: list[str] = []
        calls: dict[int, list[str]] = {}  # index -> [id, name, arguments]
        usage = None
        chose = False
        stream = await client.post(
            PATH,
            cast_to=ChatCompletion,
            content=bytes(body),  # joined, as in `_post`
            options={"security": {"bearer_auth": True}},
            stream=True,
            stream_cls=openai.AsyncStream[ChatCompletionChunk],
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
                ToolInvocation(id=id_ or new_call_id(), name=name, arguments=parse_arguments(args))
                for id_, name, args in (calls[i] for i in sorted(calls))
            ),
            input_tokens=usage.prompt_tokens if usage is not None else 0,
            output_tokens=usage.completion_tokens if usage is not None else 0,
        )


# What `chat.completions.create` posts to (the base URL ends in /v1).
PATH = "/chat/completions"
NO_CHOICES = "The provider returned no choices"


def _options(tools: Tools) -> dict[str, Any]:
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
