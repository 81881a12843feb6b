"""An answer is what its events say: one fold of a run's events, whether they are the run's
own as it sends them, the stored ones of a run whose process died, or those the AI SDK's
stream is written from.

The events are the only record of an answer in flight: nothing else keeps its text, its tool
calls or their results while it runs. `parts` keeps the order in which text and tool calls
happened: the deltas of one provider reply make one text part, and text after a tool call
(the next reply's) starts a new one.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from controlcenter.chat.events import Event

Part = dict[str, Any]


@dataclass
class Fold:
    """The answer so far; `add` each event in the order sent."""

    conversation_id: str | None = None
    content: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    tool_results: list[dict[str, Any]] = field(default_factory=list)
    parts: list[Part] = field(default_factory=list)

    def add(self, event: Event) -> bool:
        """The event folded in; True when it began a new text part."""
        kind = event.get("type")
        if kind == "content_delta":
            delta: str = event["delta"]
            self.content += delta
            last = self.parts[-1] if self.parts else None
            if last is not None and last["type"] == "text":
                last["text"] += delta
                return False
            self.parts.append({"type": "text", "text": delta})
            return True
        if kind == "tool_call_start":
            call = event["toolCall"]
            self.tool_calls.append(call)
            self.parts.append({"type": "toolCall", "toolCallId": call["id"]})
        elif kind == "tool_result":
            self.tool_results.append(event["toolResult"])
        elif kind == "message_start":
            self.conversation_id = event["conversationId"]
        return False


def fold(events: Iterable[Event]) -> Fold:
    folded = Fold()
    for event in events:
        folded.add(event)
    return folded
