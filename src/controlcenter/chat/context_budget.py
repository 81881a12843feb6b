"""The history sent to the provider, cut to the chat policy's `contextTokenBudget`:
oldest turns first, a tool call never separated from its result, the new
message always sent.

Tokens are estimated (about four characters a token, plus a few per turn), the same way for
both providers; the estimate only has to keep a long conversation well inside the model's
context window, not count exactly.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from controlcenter.llm.types import AssistantTurn, ToolResultsTurn, Turn, UserTurn

CHARS_PER_TOKEN = 4
TOKENS_PER_TURN = 4


def estimate(turn: Turn) -> int:
    if isinstance(turn, UserTurn):
        chars = len(turn.text)
    elif isinstance(turn, AssistantTurn):
        chars = len(turn.text) + sum(
            len(call.name) + len(json.dumps(call.arguments)) for call in turn.tool_calls
        )
    else:
        chars = sum(len(result.line()) for result in turn.results)
    return chars // CHARS_PER_TOKEN + TOKENS_PER_TURN


def fit(history: Sequence[Turn], kept: Sequence[Turn], budget: int) -> list[Turn]:
    """`history` (older turns) cut so that it and `kept` (the new message and the current
    answer's turns, always sent) fit `budget`; then `kept`.

    The history is cut in units: an assistant turn with tool calls goes with the results
    that follow it. What remains starts with a user turn (both APIs want one first)."""
    room = budget - sum(estimate(turn) for turn in kept)
    units = _units(history)
    chosen: list[list[Turn]] = []
    for unit in reversed(units):
        cost = sum(estimate(turn) for turn in unit)
        if cost > room:
            break
        room -= cost
        chosen.append(unit)
    chosen.reverse()
    while chosen and not isinstance(chosen[0][0], UserTurn):
        chosen.pop(0)
    return [turn for unit in chosen for turn in unit] + list(kept)


def _units(turns: Sequence[Turn]) -> list[list[Turn]]:
    units: list[list[Turn]] = []
    for turn in turns:
        answers_previous = (
            isinstance(turn, ToolResultsTurn)
            and units
            and isinstance(units[-1][-1], AssistantTurn)
            and units[-1][-1].tool_calls
        )
        if answers_previous:
            units[-1].append(turn)
        else:
            units.append([turn])
    return units
