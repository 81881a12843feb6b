"""The chat's request (`/chat` and `/ui-chat` alike): its body read, and its checks in order
(steps 2-4; step 5 needs the settings and is the service's)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fastapi import Request

from controlcenter.chat.conversations import LAST_ANSWER, REPLACEABLE
from controlcenter.providers.base import PROVIDER_A, PROVIDERS
from controlcenter.web.body import read_json
from controlcenter.web.errors import ApiError, InvalidJSONError, InvalidTextError

MISSING_MESSAGE = "Missing or empty message"
MESSAGE_MAX_CHARS = 32_000  # characters (code points), not bytes
MESSAGE_TOO_LONG = f"Message too long: at most {MESSAGE_MAX_CHARS} characters"
INVALID_PROVIDER = f"Invalid provider: must be one of {', '.join(PROVIDERS)}"
INVALID_JSON = "Invalid JSON body"
INVALID_TEXT = "Invalid text: strings must not contain NUL characters or unpaired surrogates"
INVALID_REPLACE = f"Invalid replace: must be one of {', '.join(REPLACEABLE)}"
REPLACE_NEEDS_CONVERSATION = "Missing conversationId: replace applies to a conversation"
# What a `conversationId` that is not a string reads as: an id that names no conversation, so
# the turn answers `Conversation not found` as for any unknown id. Body strings hold no NUL
# nor lone surrogate (`read_chat_body` refuses them), so every id passed on is one the
# database can be asked about.
NO_CONVERSATION = ""


class ChatRequestError(ValueError):
    """The request breaks one of the checks; the message is the answer's `error`."""


@dataclass(frozen=True)
class ChatInput:
    """A chat request that passed the checks on its body."""

    message: str
    conversation_id: str | None  # None when absent or null (a new conversation)
    provider: str
    replace: str | None = None  # `lastAnswer` or `lastMessage`; None when absent or null


async def read_chat_body(request: Request) -> Any:
    """The body as JSON; the chat's errors are plain `{error}` answers."""
    try:
        return await read_json(request)
    except InvalidJSONError as exc:
        raise ApiError(400, INVALID_JSON) from exc
    except InvalidTextError as exc:
        raise ApiError(400, INVALID_TEXT) from exc


def parse_chat_request(body: Any) -> ChatInput:
    """Raises ChatRequestError for a missing/blank message or a provider that is not allowed,
    and for a `replace` that is not one of its values or comes without a conversation.

    With `replace: "lastAnswer"` the message is the conversation's own last one: `message`
    is not read."""
    fields = body if isinstance(body, dict) else {}
    replace = fields.get("replace")
    if replace is not None and replace not in REPLACEABLE:
        raise ChatRequestError(INVALID_REPLACE)
    message = fields.get("message")
    if replace == LAST_ANSWER:
        message = ""
    elif not isinstance(message, str) or not message.strip():
        raise ChatRequestError(MISSING_MESSAGE)
    if len(message) > MESSAGE_MAX_CHARS:
        raise ChatRequestError(MESSAGE_TOO_LONG)
    provider = fields.get("provider", PROVIDER_A)
    if not isinstance(provider, str) or provider not in PROVIDERS:
        raise ChatRequestError(INVALID_PROVIDER)
    conversation_id = fields.get("conversationId")
    if replace is not None and conversation_id is None:
        raise ChatRequestError(REPLACE_NEEDS_CONVERSATION)
    if conversation_id is not None and not isinstance(conversation_id, str):
        conversation_id = NO_CONVERSATION
    return ChatInput(
        message=message, conversation_id=conversation_id, provider=provider, replace=replace
    )
