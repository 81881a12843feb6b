"""provider_a: the Anthropic Messages API through the official async SDK."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import anthropic
import httpx2
from anthropic.lib.streaming import AsyncMessageStreamManager
from anthropic.types import (
    Message,
    MessageParam,
    RawMessageStreamEvent,
    TextBlockParam,
    ToolParam,
    ToolResultBlockParam,
    ToolUseBlockParam,
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
    sendable_turns,
)
from controlcenter.providers.sdk import OnText, ProviderOptions, SdkErrors, SdkProvider, Tools

Block = TextBlockParam | ToolUseBlockParam | ToolResultBlockParam


class AnthropicProvider(SdkProvider[anthropic.AsyncAnthropic, MessageParam]):
    errors = SdkErrors(
        anthropic.APIStatusError,
        anthropic.APITimeoutError,
        anthropic.APIConnectionError,
        anthropic.APIError,
    )

    def __init__(self, options: ProviderOptions) -> None:
        super().__init__(options, anthropic.AsyncAnthropic, anthropic.DefaultAioHttpClient)

    def _messages(self, system: str, turns: Sequence[Turn]) -> list[MessageParam]:
        return to_messages(turns)  # the system prompt is a field of its own here

    def _fixed(self, system: str, tools: Tools) -> Fixed:
        # The keys in `messages.create`'s and `messages.stream`'s order, so the bytes are the
        # ones they would send.
        before = {"max_tokens": self._max_tokens}
        after = {"model": self._model, **_options(system, tools)}
        return Fixed(Body.around(before, after), Body.around(before, {**after, "stream": True}))

    async def _post(self, client: anthropic.AsyncAnthropic, body: Parts) -> ProviderReply:
        # The raw answer (the SDK's documented `cast_to=httpx.Response`): retries, status
        # errors and timeouts stay the SDK's, but the reply is read from its JSON here, for
        # the four fields the chat uses, instead of as a `Message` built with `construct_type`
        # for every block, which costs more than the rest of the reply's handling
        # (docs/providers.md, "Request bodies").
        raw = await client.post(
            PATH, cast_to=httpx2.Response, content=body, options={"headers": body.headers}
        )
        data = raw.json()  # not JSON at all: ProviderError through sdk_errors
        if not isinstance(data, dict):
            raise ProviderError(UNREADABLE_MESSAGE, None)
        return _reply_json(data)

    async def _stream(
        self, client: anthropic.AsyncAnthropic, body: Parts, on_text: OnText
    ) -> ProviderReply:
        """What `messages.stream` does with its request: the SDK's event stream read by its
        stream manager, which also builds the message; the request is the helper's own, its
        headers included."""
        request = client.post(
            PATH,
            cast_to=Message,
            content=body,
            options={"headers": {**body.headers, **STREAM_HEADERS}},
            stream=True,
            stream_cls=anthropic.AsyncStream[RawMessageStreamEvent],
        )
        async with AsyncMessageStreamManager(request) as stream:
            async for event in stream:
                if event.type == "text" and event.text:
                    on_text(event.text)
            return _reply(await stream.get_final_message())


# What `messages.create` and `messages.stream` post to.
PATH = "/v1/messages"
# The headers `messages.stream` adds to its request (the SDK's telemetry of its helpers).
STREAM_HEADERS = {"x-stainless-helper-method": "stream", "x-stainless-stream-helper": "messages"}


def _options(system: str, tools: Tools) -> dict[str, Any]:
    options: dict[str, Any] = {}
    if has_text(system):
        options["system"] = system
    if tools:
        options["tools"] = [_tool(spec) for spec in tools]
    return options


def _reply(message: Message) -> ProviderReply:
    text = "".join(block.text for block in message.content if block.type == "text")
    calls = tuple(
        ToolInvocation(
            id=block.id or new_call_id(), name=block.name, arguments=_object(block.input)
        )
        for block in message.content
        if block.type == "tool_use"
    )
    return ProviderReply(
        text=text,
        tool_calls=calls,
        input_tokens=message.usage.input_tokens,
        output_tokens=message.usage.output_tokens,
    )


def _reply_json(data: Any) -> ProviderReply:
    """`_reply` of the Messages API's JSON answer, read as the SDK's `Message` would be: a
    missing part is empty (no text, no calls, 0 tokens), a tool call without id gets one."""
    message = data if isinstance(data, dict) else {}
    content = message.get("content")
    blocks = [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []
    text = "".join(str(b.get("text") or "") for b in blocks if b.get("type") == "text")
    calls = tuple(
        ToolInvocation(
            id=b.get("id") or new_call_id(),
            name=str(b.get("name") or ""),
            arguments=_object(b.get("input")),
        )
        for b in blocks
        if b.get("type") == "tool_use"
    )
    usage = message.get("usage")
    usage = usage if isinstance(usage, dict) else {}
    return ProviderReply(
        text=text,
        tool_calls=calls,
        input_tokens=_tokens(usage.get("input_tokens")),
        output_tokens=_tokens(usage.get("output_tokens")),
    )


def _tokens(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


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
