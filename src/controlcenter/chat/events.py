"""The chat's stream events: each event's shape, defined here once (the builders below are
checked against it, and the interface description, `chat.schemas`, is made of it), and their
wire form: `data: <JSON>` and a blank line."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Annotated, Any, Literal, NotRequired

from pydantic import Field, WithJsonSchema
from typing_extensions import TypedDict

from controlcenter.llm.types import ToolCall, ToolInvocation, ToolOutcome, ToolResult
from controlcenter.providers.base import PROVIDERS

Event = Mapping[str, Any]
"""Any one event, as sent or as read back from its stored JSON."""

ProviderName = Annotated[str, WithJsonSchema({"type": "string", "enum": list(PROVIDERS)})]
"""A provider's name, one of `providers.base.PROVIDERS`."""
DateTime = Annotated[str, WithJsonSchema({"type": "string", "format": "date-time"})]
"""A moment as `common.times.iso` writes it."""


class Usage(TypedDict):
    """An assistant message's tokens, from the providers' own counts."""

    inputTokens: int
    outputTokens: int
    providerCalls: int


class TextPart(TypedDict):
    type: Literal["text"]
    text: str


class ToolCallPart(TypedDict):
    type: Literal["toolCall"]
    toolCallId: str


Part = Annotated[TextPart | ToolCallPart, Field(discriminator="type")]


class ChatMessage(TypedDict):
    """A message of a conversation; `message_complete` carries the answer's."""

    id: str
    role: Literal["user", "assistant"]
    content: str
    toolCalls: NotRequired[
        Annotated[list[ToolCall], Field(description="only when the message made tool calls")]
    ]
    toolResults: NotRequired[
        Annotated[list[ToolResult], Field(description="only when the message made tool calls")]
    ]
    parts: NotRequired[
        Annotated[
            list[Part],
            Field(
                description="assistant messages: the text of each provider reply and the tool "
                "calls, in order"
            ),
        ]
    ]
    createdAt: DateTime
    usage: NotRequired[Annotated[Usage, Field(description="assistant messages")]]
    interrupted: NotRequired[
        Annotated[Literal[True], Field(description="closed after its process died")]
    ]


class MessageStart(TypedDict):
    type: Literal["message_start"]
    conversationId: str
    messageId: str


class ContentDelta(TypedDict):
    type: Literal["content_delta"]
    delta: str


class ToolCallStart(TypedDict):
    type: Literal["tool_call_start"]
    toolCall: ToolCall


# `from` is a keyword: the shape is written in TypedDict's functional form.
ProviderFallback = TypedDict(
    "ProviderFallback",
    {"type": Literal["provider_fallback"], "from": ProviderName, "to": ProviderName},
)
ProviderFallback.__doc__ = "With the chat policy's `fallback`."


class ToolApprovalRequired(TypedDict):
    """With the chat policy's `toolApproval: "writes"`."""

    type: Literal["tool_approval_required"]
    toolCall: ToolCall


class ToolResultEvent(TypedDict):
    type: Literal["tool_result"]
    toolResult: ToolResult


class MessageComplete(TypedDict):
    type: Literal["message_complete"]
    message: ChatMessage
    stopped: NotRequired[
        Annotated[Literal[True], Field(description="only when the message was stopped")]
    ]


class ErrorEvent(TypedDict):
    type: Literal["error"]
    error: str
    code: NotRequired[str]


AnyEvent = Annotated[
    MessageStart
    | ContentDelta
    | ToolCallStart
    | ProviderFallback
    | ToolApprovalRequired
    | ToolResultEvent
    | MessageComplete
    | ErrorEvent,
    Field(discriminator="type"),
]
"""One event of the stream, by its `type`."""


def message_start(conversation_id: str, message_id: str) -> MessageStart:
    return {"type": "message_start", "conversationId": conversation_id, "messageId": message_id}


def content_delta(delta: str) -> ContentDelta:
    return {"type": "content_delta", "delta": delta}


def tool_call_start(call: ToolInvocation) -> ToolCallStart:
    return {"type": "tool_call_start", "toolCall": call.to_json()}


def tool_approval_required(call: ToolInvocation) -> ToolApprovalRequired:
    """The call writes and waits for the user's approve or deny."""
    return {"type": "tool_approval_required", "toolCall": call.to_json()}


def tool_result(result: ToolOutcome) -> ToolResultEvent:
    return {"type": "tool_result", "toolResult": result.to_json()}


def provider_fallback(origin: str, to: str) -> ProviderFallback:
    """This step goes to the other provider after an error of the first."""
    return {"type": "provider_fallback", "from": origin, "to": to}


def message_complete(message: ChatMessage, *, stopped: bool = False) -> MessageComplete:
    event: MessageComplete = {"type": "message_complete", "message": message}
    if stopped:
        event["stopped"] = True  # absent otherwise
    return event


# The last event of an answer whose process stopped before it ended (died, or cancelled it at
# shutdown).
ANSWER_INTERRUPTED = "The answer was interrupted"


def error(message: str, code: str | None = None) -> ErrorEvent:
    event: ErrorEvent = {"type": "error", "error": message}
    if code is not None:
        event["code"] = code
    return event


def frame(event: Event) -> bytes:
    return frame_of(event_data(event))


def event_data(event: Event) -> str:
    return json.dumps(event, ensure_ascii=False, separators=(",", ":"), default=str)


def parsed(data: str) -> Event:
    """A stored event's JSON text, as the event it is."""
    event: Event = json.loads(data)
    return event


def frame_of(data: str, event_id: str | None = None) -> bytes:
    """One event's frame; with an id, its `id:` line first."""
    if event_id is None:
        return f"data: {data}\n\n".encode()
    return f"id: {event_id}\ndata: {data}\n\n".encode()


def is_last(data: str) -> bool:
    """Whether a stored event ends its message's stream."""
    kind = json.loads(data).get("type")
    return kind in ("message_complete", "error")
