"""A chat turn as operators see it: counted (started, completed, failed) and
traced as one span that the turn's provider and tool spans hang from.

Wraps the run and its channel from the outside, so the chat's own modules only swap in
`ObservedChannel` and `observed_run`.
"""

from __future__ import annotations

from collections.abc import Coroutine
from typing import Any

from controlcenter.chat.channel import EventChannel
from controlcenter.chat.events import ANSWER_INTERRUPTED, Event
from controlcenter.chat.liveness import Liveness
from controlcenter.observability import tracing
from controlcenter.observability.metrics import CHATS

COMPLETED = "completed"
FAILED = "failed"


class ObservedChannel(EventChannel):
    """Notes how the turn ended (`message_complete` or `error`), and tells `liveness` which
    answers run here (a dead process's answer is closed by another), and whether the write of
    an answer's end deleted its row (the end stored) or the row is still to be deleted."""

    __slots__ = ("_end_stored", "_liveness", "_message_id", "outcome")

    def __init__(self, liveness: Liveness | None = None, *, ids: bool = False) -> None:
        super().__init__(ids=ids)
        self.outcome: str | None = None
        self._liveness = liveness
        self._message_id: str | None = None
        self._end_stored = True

    def end_unstored(self, last: Event | None) -> None:
        self._end_stored = False
        super().end_unstored(last)
        if last is None:
            self._ended()

    def note(self, event: Event) -> None:
        kind = event.get("type")
        if kind == "message_start" and self._liveness is not None:
            self._message_id = event["messageId"]
            self._liveness.started(event["messageId"])
        if kind == "message_complete" or kind == "error":
            self.outcome = COMPLETED if kind == "message_complete" else FAILED
            # An answer interrupted at shutdown keeps its row: another process (or the next
            # start) saves the answer so far, whenever this one's liveness task stops.
            if event.get("error") != ANSWER_INTERRUPTED:
                self._ended()

    def _ended(self) -> None:
        if self._message_id is None or self._liveness is None:
            return
        if self._end_stored:
            self._liveness.ended(self._message_id)
        else:
            self._liveness.finished(self._message_id)


async def observed_run(
    run: Coroutine[Any, Any, None], channel: ObservedChannel, *, provider: str
) -> None:
    CHATS.labels("started").inc()
    with tracing.span("chat turn", **{"chat.provider": provider}) as current:
        try:
            await run
        finally:
            outcome = channel.outcome or FAILED  # cancelled at shutdown: not completed
            CHATS.labels(outcome).inc()
            if outcome == FAILED:
                tracing.fail(current, "the turn ended with an error")
