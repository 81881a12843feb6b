"""The ChatRequest (SPEC 2.3) and its checks, in SPEC 4.2's order (steps 2-4; step 5 needs
the settings and is the service's)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from controlcenter.admin_settings.names import PROVIDER_A_API_KEY, PROVIDER_B_API_KEY, SettingName
from controlcenter.chat.models import Conversation, Message
from controlcenter.common.times import iso
from controlcenter.providers.base import PROVIDER_A, PROVIDER_B, PROVIDERS

MISSING_MESSAGE = "Missing or empty message"
MESSAGE_MAX_CHARS = 32_000  # CONTRACT 9; characters (code points), as SPEC 8 counts them
MESSAGE_TOO_LONG = f"Message too long: at most {MESSAGE_MAX_CHARS} characters"
INVALID_PROVIDER = f"Invalid provider: must be one of {', '.join(PROVIDERS)}"
INVALID_TEXT = "Invalid text: strings must not contain NUL characters or unpaired surrogates"
API_KEY_SETTINGS: dict[str, SettingName] = {
    PROVIDER_A: PROVIDER_A_API_KEY,
    PROVIDER_B: PROVIDER_B_API_KEY,
}


class ChatRequestError(ValueError):
    """The request breaks one of SPEC 4.2's checks; the message is the answer's `error`."""


@dataclass(frozen=True)
class ChatRequest:
    message: str
    conversation_id: Any  # None when absent or null; otherwise the raw value (see docs/chat.md)
    provider: str


def parse_chat_request(body: Any) -> ChatRequest:
    """Raises ChatRequestError for a missing/blank message or a provider that is not allowed."""
    fields = body if isinstance(body, dict) else {}
    message = fields.get("message")
    if not isinstance(message, str) or not message.strip():
        raise ChatRequestError(MISSING_MESSAGE)
    if len(message) > MESSAGE_MAX_CHARS:
        raise ChatRequestError(MESSAGE_TOO_LONG)
    provider = fields.get("provider", PROVIDER_A)
    if not isinstance(provider, str) or provider not in PROVIDERS:
        raise ChatRequestError(INVALID_PROVIDER)
    return ChatRequest(
        message=message, conversation_id=fields.get("conversationId"), provider=provider
    )


def missing_key_message(provider: str) -> str:
    return f"No API key configured for {provider}. Please add it in settings."


def conversation_json(row: Conversation) -> dict[str, Any]:
    return {
        "id": row.id,
        "title": row.title,
        "createdAt": iso(row.created_at),
        "updatedAt": iso(row.updated_at),
    }


def message_json(row: Message) -> dict[str, Any]:
    """A stored message / ControlCenterMessage: toolCalls and toolResults only when present."""
    body: dict[str, Any] = {"id": row.id, "role": row.role, "content": row.content}
    if row.tool_calls:
        body["toolCalls"] = row.tool_calls
    if row.tool_results:
        body["toolResults"] = row.tool_results
    body["createdAt"] = iso(row.created_at)
    if row.usage is not None:
        body["usage"] = row.usage  # CONTRACT 11: an added field of assistant messages
    if row.interrupted:
        body["interrupted"] = True  # CONTRACT 13: closed after its process died
    return body


def conversation_with_messages(row: Conversation, messages: list[Message]) -> dict[str, Any]:
    return {**conversation_json(row), "messages": [message_json(m) for m in messages]}
