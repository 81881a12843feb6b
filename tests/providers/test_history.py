"""The history rules both providers share: what is sendable, how arguments and errors are read."""

from __future__ import annotations

from controlcenter.common.secrets import redact
from controlcenter.llm.types import (
    AssistantTurn,
    ToolInvocation,
    ToolOutcome,
    ToolResultsTurn,
    Turn,
    UserTurn,
)
from controlcenter.providers.history import parse_arguments, sendable_turns

CALL_A = ToolInvocation("a", "t", {})
CALL_B = ToolInvocation("b", "t", {})


def test_blank_turns_are_dropped() -> None:
    turns: list[Turn] = [UserTurn(""), UserTurn("hi"), AssistantTurn(" \n"), UserTurn("again")]
    assert sendable_turns(turns) == [UserTurn("hi"), UserTurn("again")]


def test_calls_without_results_are_dropped_but_their_text_kept() -> None:
    turns: list[Turn] = [UserTurn("hi"), AssistantTurn("checking", (CALL_A,)), UserTurn("?")]
    assert sendable_turns(turns) == [UserTurn("hi"), AssistantTurn("checking"), UserTurn("?")]


def test_partly_answered_calls_keep_only_the_answered_ones() -> None:
    result_b = ToolOutcome("b", True, 2)
    turns: list[Turn] = [
        UserTurn("hi"),
        AssistantTurn("", (CALL_A, CALL_B)),
        ToolResultsTurn((result_b,)),
    ]
    assert sendable_turns(turns) == [
        UserTurn("hi"),
        AssistantTurn("", (CALL_B,)),
        ToolResultsTurn((result_b,)),
    ]


def test_results_follow_their_calls_order_and_strays_are_dropped() -> None:
    a, b, stray = (
        ToolOutcome("a", True, 1),
        ToolOutcome("b", False, error="x"),
        ToolOutcome("z", True),
    )
    turns: list[Turn] = [
        UserTurn("hi"),
        AssistantTurn("", (CALL_A, CALL_B)),
        ToolResultsTurn((stray, b, a)),
    ]
    assert sendable_turns(turns)[-1] == ToolResultsTurn((a, b))
    assert sendable_turns([UserTurn("hi"), ToolResultsTurn((a,))]) == [UserTurn("hi")]


def test_parse_arguments() -> None:
    assert parse_arguments('{"q": "x"}') == {"q": "x"}
    assert parse_arguments('{"q": ') == {}
    assert parse_arguments("[1]") == {}
    assert parse_arguments("") == {}
    assert parse_arguments(None) == {}


def test_redact_removes_the_key_and_masked_quotes() -> None:
    key = "sk-proj-" + "q" * 30 + "WXYZ"
    assert redact(f"bad {key} here", key) == "bad [redacted] here"
    masked = "Incorrect API key provided: sk-pro*************WXYZ. You can find your API key."
    assert (
        redact(masked, key) == "Incorrect API key provided: [redacted]. You can find your API key."
    )
    assert redact("plain message", key) == "plain message"
