"""The chat's stream events and their wire form: `data: <JSON>` and a blank line."""

from __future__ import annotations

import json
from typing import Any

from controlcenter.llm.types import ToolInvocation, ToolOutcome

Event = dict[str, Any]


def message_start(conversation_id: str, message_id: str) -> Event:
    return {"type": "message_start", "conversationId": conversation_id, "messageId": message_id}


def content_delta(delta: str) -> Event:
    return {"type": "content_delta", "delta": delta}


def tool_call_start(call: ToolInvocation) -> Event:
    return {"type": "tool_call_start", "toolCall": call.to_json()}


def tool_approval_required(call: ToolInvocation) -> Event:
    """The call writes and waits for the user's approve or deny."""
    return {"type": "tool_approval_required", "toolCall": call.to_json()}


def tool_result(result: ToolOutcome) -> Event:
    return {"type": "tool_result", "toolResult": result.to_json()}


def provider_fallback(origin: str, to: str) -> Event:
    """This step goes to the other provider after an error of the first."""
    return {"type": "provider_fallback", "from": origin, "to": to}


def message_complete(message: dict[str, Any], *, stopped: bool = False) -> Event:
    event: Event = {"type": "message_complete", "message": message}
    if stopped:
        event["stopped"] = True  # absent otherwise
    return event


# The last event of an answer whose process stopped before it ended (died, or cancelled it at
# shutdown).
ANSWER_INTERRUPTED = "The answer was interrupted"


def error(message: str, code: str | None = None) -> Event:
    event: Event = {"type": "error", "error": message}
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
