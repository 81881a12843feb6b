"""The history as both APIs accept it, before each provider spells it in its own form.

The real APIs reject a request whose tool calls and tool results do not pair up (every call
answered in the next message, every result answering a call of the previous one), and one
with empty text. A stored history can break both rules (an empty assistant reply, a turn cut
short by an error), so the turns are made sendable here, once, for both providers.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence

from controlcenter.llm.types import AssistantTurn, ToolOutcome, ToolResultsTurn, Turn, UserTurn

# The same words for both providers (the SDKs word them differently).
TIMEOUT_MESSAGE = "Request timed out."
CONNECTION_MESSAGE = "Connection error."
EMPTY_MESSAGE = "There is no message to send"
# A 200 whose body is not the API's JSON (a proxy's HTML page, a cut-off body).
UNREADABLE_MESSAGE = "The provider's answer could not be read"


def sendable_turns(turns: Sequence[Turn]) -> list[Turn]:
    """Drop blank text and unanswered calls; order each turn's results as its calls."""
    out: list[Turn] = []
    for index, turn in enumerate(turns):
        if isinstance(turn, UserTurn):
            if has_text(turn.text):
                out.append(turn)
        elif isinstance(turn, AssistantTurn):
            following = turns[index + 1] if index + 1 < len(turns) else None
            answered = (
                {r.tool_call_id for r in following.results}
                if isinstance(following, ToolResultsTurn)
                else set()
            )
            calls = tuple(call for call in turn.tool_calls if call.id in answered)
            if calls or has_text(turn.text):
                out.append(AssistantTurn(text=turn.text, tool_calls=calls))
        else:
            previous = out[-1] if out else None
            if not isinstance(previous, AssistantTurn) or not previous.tool_calls:
                continue
            by_id: dict[str, ToolOutcome] = {}
            for result in turn.results:
                by_id.setdefault(result.tool_call_id, result)
            out.append(ToolResultsTurn(results=tuple(by_id[c.id] for c in previous.tool_calls)))
    return out


def new_call_id() -> str:
    """An id for a call whose server gave none (some OpenAI-compatible servers send ""):
    results are paired with calls by id."""
    return "call_" + uuid.uuid4().hex[:24]


def has_text(text: str) -> bool:
    """Both APIs reject text blocks that are empty or only whitespace."""
    return text.strip() != ""


def parse_arguments(raw: str | None) -> dict[str, object]:
    """A model's JSON arguments as an object; `{}` when they are not one.

    A model can emit arguments that are not a JSON object (truncated output, a bare string).
    The call is kept with no arguments so that the tool's own validation answers the model
    with a failed ToolOutcome it can correct, instead of failing the whole chat.
    """
    if not raw:
        return {}
    try:
        value = json.loads(raw)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}
