"""The chat's requests, answers and events as JSON: the models that describe them in the
interface description (`tests/test_openapi.py` checks real answers against them), and the
functions that build the answers from the stored rows.

Nothing here restates a shape defined elsewhere: the events and the message they carry are
`chat.events`'s own types, and a request's limits and names are the ones its checks use
(`chat.request`, `providers.base.PROVIDERS`, `chat.conversations.REPLACEABLE`)."""

from __future__ import annotations

from typing import Annotated, Any, Literal, cast

from pydantic import (
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    Json,
    RootModel,
    StringConstraints,
    WithJsonSchema,
)

from controlcenter.chat import models
from controlcenter.chat.conversations import REPLACEABLE
from controlcenter.chat.events import AnyEvent, ChatMessage, ProviderName, Usage
from controlcenter.chat.request import MESSAGE_MAX_CHARS
from controlcenter.common.times import iso
from controlcenter.web.openapi_doc import absent, schema_extra
from controlcenter.web.validation import STORABLE

Replace = Annotated[str, WithJsonSchema({"type": "string", "enum": list(REPLACEABLE)})]
"""What of a conversation's last turn a request replaces (`chat.conversations.REPLACEABLE`)."""
NOT_BLANK = "^[^\\u0000]*[^\\s\\u0000][^\\u0000]*$"
"""Some character that is not white space (and, as in every body, no NUL)."""
_NEW_CONVERSATION = "absent: a new conversation"


class ChatRequest(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={
            "example": {"message": "Which contacts did I add this week?", "provider": "provider_a"},
            "dependentRequired": {"replace": ["conversationId"]},
        }
    )
    message: str = Field(
        min_length=1,
        max_length=MESSAGE_MAX_CHARS,
        pattern=NOT_BLANK,
        description=f"not blank, at most {MESSAGE_MAX_CHARS} characters (code points); "
        'not read with `replace: "lastAnswer"`',
    )
    conversationId: str = absent(_NEW_CONVERSATION)
    provider: ProviderName = Field(
        default="provider_a",
        description="its API key must be set in the settings (else 400 `No API key configured`)",
    )
    replace: Replace = absent(
        "with `conversationId`: `lastAnswer` answers the conversation's last user message "
        "again in place of its last answer; `lastMessage` puts `message` in place of its last "
        "user message and that message's answer. Either is refused with the `error` event "
        "`An answer is still running in this conversation` while one runs."
    )


class UiChatRequest(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={
            "example": {
                "id": "chat-1",
                "trigger": "submit-message",
                "messages": [
                    {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "Hi"}]}
                ],
            }
        }
    )
    id: str = absent()
    messages: list[dict[str, Any]] = Field(
        min_length=1,
        description="AI SDK UIMessages; the last must be the user's, with text parts "
        f"(not blank, at most {MESSAGE_MAX_CHARS} characters in all)",
    )
    trigger: str = absent("`regenerate-message` in a conversation: its last answer is replaced")
    messageId: str = absent(
        "with `submit-message` in a conversation: the edited message replaces its last user message"
    )
    conversationId: str = absent(_NEW_CONVERSATION)
    provider: ProviderName = absent()


class Conversation(BaseModel):
    id: str
    title: str
    createdAt: AwareDatetime = absent()
    updatedAt: AwareDatetime = absent()
    messages: list[ChatMessage] = absent("in GET /conversations/{conversation_id}")


TITLE_MAX = 200
Title = Annotated[
    str, StringConstraints(strip_whitespace=True, min_length=1, max_length=TITLE_MAX), STORABLE
]
"""A conversation's title as a client sets it: 1-200 characters after trimming."""


class ConversationRename(BaseModel):
    """The conversation's new title, stored trimmed."""

    model_config = schema_extra({"title": "Okafor lease renewal"}, strict=True, extra="forbid")
    title: Title


class ConversationPage(BaseModel):
    conversations: list[Conversation]
    nextCursor: str | None


class ConversationAnswer(BaseModel):
    conversation: Conversation


class ProviderList(BaseModel):
    providers: list[ProviderName] = Field(
        description="the providers whose key is set, in order; empty: no chat can start"
    )


class ToolName(BaseModel):
    name: str = Field(description="as in `toolCall.name`")
    title: str | None = Field(description="what a person calls it; null when it has none")


class ToolList(BaseModel):
    tools: list[ToolName]


class ChatPolicy(BaseModel):
    toolApproval: Literal["off", "writes"]
    monthlyTokenQuota: int | None = Field(ge=0)
    fallback: bool
    contextTokenBudget: int = Field(ge=1000)


class ChatPolicyAnswer(BaseModel):
    policy: ChatPolicy


class UserUsage(BaseModel):
    userId: str
    email: str
    name: str
    inputTokens: int
    outputTokens: int
    chats: int
    toolCalls: int


class UsageReport(BaseModel):
    month: str = Field(description="YYYY-MM")
    users: list[UserUsage]


class ChatEvent(RootModel[Any]):
    """One `data:` frame of the chat's event stream."""

    root: AnyEvent


class ChatEventFrame(BaseModel):
    """One event of the stream. Before OpenAPI 3.2 an event stream's `schema` describes one
    event: its `data` line holds a JSON ChatEvent (what 3.2 calls the `itemSchema`)."""

    data: Json[ChatEvent]


UiChunkType = Literal[
    "start",
    "text-start",
    "text-delta",
    "text-end",
    "tool-input-available",
    "tool-output-available",
    "tool-output-error",
    "finish",
    "error",
]


class UiMessageChunk(BaseModel):
    """One `data:` frame of the AI SDK's UI message stream (then `[DONE]`)."""

    model_config = ConfigDict(extra="allow")
    type: UiChunkType


class UiMessageFrame(BaseModel):
    """The UI message stream ends with the frame `data: [DONE]`, which is not JSON."""

    data: Literal["[DONE]"] | Json[UiMessageChunk]


SSE_DESCRIPTION = (
    "Server-sent events: each frame is `data: <JSON ChatEvent>` and a blank line. Order: "
    "`message_start`, then `content_delta`, `tool_call_start` and `tool_result` events, then "
    "`message_complete`; after an `error` event nothing follows. Errors found before the "
    "stream starts are plain JSON answers (400, 401). With `?ids=1` (and always on the "
    "events endpoint) each frame also has an `id: <messageId>:<n>` line."
)
SSE_EXAMPLE = (
    'data: {"type":"message_start","conversationId":"c1","messageId":"msg_1763888400000_a1b2c3d4e"}'
    '\n\ndata: {"type":"content_delta","delta":"You added 3 contacts."}\n\n'
    'data: {"type":"message_complete","message":{"id":"msg_1763888400000_a1b2c3d4e",'
    '"role":"assistant","content":"You added 3 contacts.","createdAt":"2026-11-23T09:00:00.000Z"}}'
    "\n\n"
)
UI_STREAM_DESCRIPTION = "The Vercel AI SDK's UI message stream (`docs/chat.md`)."


def conversation_json(row: models.ConversationRow) -> dict[str, Any]:
    return {
        "id": row.id,
        "title": row.title,
        "createdAt": iso(row.created_at),
        "updatedAt": iso(row.updated_at),
    }


def message_json(row: models.Message) -> ChatMessage:
    """A stored message / ControlCenterMessage: toolCalls and toolResults only when present."""
    role = cast(Literal["user", "assistant"], row.role)  # the column holds only these
    body: ChatMessage = {
        "id": row.id,
        "role": role,
        "content": row.content,
        "createdAt": iso(row.created_at),
    }
    if row.tool_calls:
        body["toolCalls"] = row.tool_calls
    if row.tool_results:
        body["toolResults"] = row.tool_results
    if row.parts is not None:
        body["parts"] = row.parts  # assistant messages: text and tool calls in their order
    if row.usage is not None:
        body["usage"] = cast(Usage, row.usage)  # assistant messages only, as the run counted
    if row.interrupted:
        body["interrupted"] = True  # closed by another process after its own died
    return body


def conversation_with_messages(
    row: models.ConversationRow, messages: list[models.Message]
) -> dict[str, Any]:
    return {**conversation_json(row), "messages": [message_json(m) for m in messages]}
