"""The chat for Vercel AI SDK front ends: the body `useChat`'s default HTTP
transport sends, and the chat's events rewritten as the AI SDK's UI message stream.

The turn itself is the chat's (`chat.service.start_chat`); this module only translates at
both ends, so the two endpoints cannot drift apart.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from controlcenter.chat.conversations import LAST_ANSWER, LAST_MESSAGE
from controlcenter.chat.events import Event
from controlcenter.chat.fold import Fold
from controlcenter.chat.request import ChatInput, parse_chat_request

DONE = b"data: [DONE]\n\n"
Chunk = dict[str, Any]


def parse_ui_chat_request(body: Any) -> ChatInput:
    """`{id, messages, trigger, messageId?}` plus the optional `conversationId` and
    `provider`: the turn runs on the last message when it is the user's, its text parts
    joined by blank lines. In a conversation, `regenerate-message` answers its last user
    message again in place of its last answer, and `submit-message` with a `messageId` (the
    SDK's edit of a message) replaces its last user message with this one. Raises
    ChatRequestError with the chat's own messages."""
    fields = body if isinstance(body, dict) else {}
    chat_body: dict[str, Any] = {"message": _last_user_text(fields.get("messages"))}
    for key in ("provider", "conversationId"):
        if key in fields:
            chat_body[key] = fields[key]
    if fields.get("conversationId") is not None:
        trigger = fields.get("trigger")
        if trigger == "regenerate-message":
            chat_body["replace"] = LAST_ANSWER
        elif trigger == "submit-message" and fields.get("messageId") is not None:
            chat_body["replace"] = LAST_MESSAGE
    return parse_chat_request(chat_body)


def _last_user_text(messages: Any) -> Any:
    if not isinstance(messages, list) or not messages:
        return None
    last = messages[-1]
    if not isinstance(last, dict) or last.get("role") != "user":
        return None
    parts = last.get("parts")
    if not isinstance(parts, list):
        return None
    texts = [
        part["text"]
        for part in parts
        if isinstance(part, dict)
        and part.get("type") == "text"
        and isinstance(part.get("text"), str)
    ]
    return "\n\n".join(texts) if texts else None


class UiChunks:
    """One answer's translation. The chat's deltas name no text part while the UI stream
    brackets each with start and end: the answer's fold (`chat.fold`) says where a text part
    begins, as it does for the stored message's `parts`."""

    __slots__ = ("_answer", "_message_id", "_parts", "_text_id")

    def __init__(self) -> None:
        self._answer = Fold()
        self._message_id = "msg"
        self._text_id: str | None = None
        self._parts = 0

    def chunks(self, event: Event) -> list[Chunk]:
        began_text = self._answer.add(event)
        kind = event.get("type")
        if kind == "message_start":
            self._message_id = event["messageId"]
            return [
                {
                    "type": "start",
                    "messageId": event["messageId"],
                    "messageMetadata": {"conversationId": event["conversationId"]},
                }
            ]
        if kind == "content_delta":
            out = self._open_text() if began_text else []
            out.append({"type": "text-delta", "id": self._text_id, "delta": event["delta"]})
            return out
        if kind == "tool_call_start":
            call = event["toolCall"]
            return [
                *self._close_text(),
                {
                    "type": "tool-input-available",
                    "toolCallId": call["id"],
                    "toolName": call["name"],
                    "input": call["arguments"],
                    # The tools are the server's (built-in and MCP), unknown to the client's
                    # typings: AI SDK calls such parts dynamic.
                    "dynamic": True,
                },
            ]
        if kind == "tool_result":
            result = event["toolResult"]
            if result["success"]:
                output: Chunk = {"type": "tool-output-available", "output": result["result"]}
            else:
                output = {"type": "tool-output-error", "errorText": result["error"]}
            return [{**output, "toolCallId": result["toolCallId"], "dynamic": True}]
        if kind == "message_complete":
            return [*self._close_text(), {"type": "finish", "finishReason": "stop"}]
        if kind == "error":
            return [*self._close_text(), {"type": "error", "errorText": event["error"]}]
        return []  # an event this client has no chunk for (none today)

    def _open_text(self) -> list[Chunk]:
        self._parts += 1
        self._text_id = f"{self._message_id}-text-{self._parts}"
        return [{"type": "text-start", "id": self._text_id}]

    def _close_text(self) -> list[Chunk]:
        if self._text_id is None:
            return []
        closed, self._text_id = self._text_id, None
        return [{"type": "text-end", "id": closed}]


def _event_of(frame: bytes) -> Event | None:
    for line in frame.decode().splitlines():
        if line.startswith("data: "):
            parsed: Event = json.loads(line[6:])
            return parsed
    return None  # a comment or a keep-alive


def _frame(chunk: Chunk) -> bytes:
    data = json.dumps(chunk, ensure_ascii=False, separators=(",", ":"), default=str)
    return f"data: {data}\n\n".encode()


async def ui_frames(frames: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """The chat's SSE frames as UI message stream frames, ended by `[DONE]`."""
    translation = UiChunks()
    try:
        async for raw in frames:
            event = _event_of(raw)
            if event is not None:
                for chunk in translation.chunks(event):
                    yield _frame(chunk)
        yield DONE
    finally:
        # The client left: the chat's channel learns it now (it stops keeping frames), not
        # when the garbage collector finalises its generator.
        close = getattr(frames, "aclose", None)
        if close is not None:
            await close()
